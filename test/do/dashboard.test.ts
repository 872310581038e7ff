// Verifies GET /dashboard as a user reaches it over HTTP: the page without a
// key (it holds no data), under its CSP; other methods refused; the data
// routes it polls still need the key.
import { SELF } from 'cloudflare:test';
import { describe, expect, it } from 'vitest';
import { DASHBOARD_CSP, DASHBOARD_HTML } from '../../shim/do/dashboard-page.ts';

const ORIGIN = 'https://limiter.test';

describe('GET /dashboard', () => {
  it('answers the page without a key, with its CSP, at /dashboard and /dashboard/', async () => {
    for (const path of ['/dashboard', '/dashboard/']) {
      const response = await SELF.fetch(`${ORIGIN}${path}`);
      expect(response.status).toBe(200);
      expect(response.headers.get('content-type')).toBe('text/html; charset=utf-8');
      expect(response.headers.get('content-security-policy')).toBe(DASHBOARD_CSP);
      expect(response.headers.get('x-content-type-options')).toBe('nosniff');
      expect(await response.text()).toBe(DASHBOARD_HTML);
    }
  });

  it('refuses other methods with 405 and the allowed one', async () => {
    const response = await SELF.fetch(`${ORIGIN}/dashboard`, { method: 'POST', body: '{}' });
    expect(response.status).toBe(405);
    expect(response.headers.get('allow')).toBe('GET');
    expect(await response.json()).toEqual({ ok: false, error: '/dashboard accepts GET only (received POST)' });
  });

  it('gives no data away: /stats, which the page polls, still needs the key', async () => {
    const response = await SELF.fetch(`${ORIGIN}/stats`);
    expect(response.status).toBe(401);
  });
});
