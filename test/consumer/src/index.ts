// The consumer application: every call to its "upstream" goes through the
// shared limiter. The upstream is simulated in-process (tests have no network).
import { api } from './limiter';

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const n = Number(new URL(request.url).searchParams.get('n') ?? '1');
    const value = await api.for(env).call(async () => Response.json({ n, at: Date.now() }), {
      read: (res) => res.json() as Promise<{ n: number; at: number }>,
    });
    return Response.json(value);
  },
} satisfies ExportedHandler<Env>;
