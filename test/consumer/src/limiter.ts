// The app's limiter, defined once at module scope: no I/O, no timers.
import { defineBinder, defineLimiter } from 'durable-rate-limiter/client';

const binder = defineBinder('RATE_LIMITER');

export const api = defineLimiter({ binder, name: 'example-api' });

/** A mistyped instance name: a bucket nobody configured. */
export const typo = defineLimiter({ binder, name: 'exmaple-api' });
