// The same two Workers under the vite dev server: the application is the
// Worker vite serves, the limiter runs beside it as an auxiliary Worker.
import { cloudflare } from '@cloudflare/vite-plugin';
import { defineConfig } from 'vite';

export default defineConfig({
  plugins: [
    cloudflare({
      configPath: './app/wrangler.jsonc',
      auxiliaryWorkers: [{ configPath: './limiter/wrangler.jsonc' }],
    }),
  ],
});
