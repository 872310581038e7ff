/**
 * The client's side of the wire protocol's compatibility window (see
 * docs/architecture.md, "The wire protocol"): what it knows of each
 * namespace's wire version, the options it sends that version, and how it
 * reads an answer.
 *
 * It learns the version from answers, never from a separate round trip. It
 * sends the newest form (`wire: 5` first, beside `settles: 'data'`, with the
 * callback as the abort relay: `relaysAbort: true`). A
 * limiter Worker of wire 5 or later marks every envelope with WIRE_BRAND and
 * its version, and answers a success with the value itself. A wire-4 one
 * (0.1.0) refuses the unknown `wire` key as data, before it takes anything or
 * invokes the callback; the client then remembers 4 for that namespace and
 * sends the same attempt again in the wire-4 form. A branded answer moves the
 * remembered version up again, so an upgrade or a rollback of the limiter
 * Worker is followed within one call.
 */
import { ENVELOPE_VERSION, OPTION_SINCE, WIRE_BRAND, type ExecuteOptions, type SettledCall } from '../envelope.ts';
import type { NamespaceLike } from './binder.ts';
import type { AttemptTrace } from './report.ts';
import type { AbortRelay } from './waiting.ts';

/** The wire version learnt per namespace; absent: assumed to be this release's. */
const learnt = new WeakMap<NamespaceLike, number>();

/** The wire version the client takes `namespace` to speak. */
export function wireOf(namespace: NamespaceLike): number {
  return learnt.get(namespace) ?? ENVELOPE_VERSION;
}

/** Remembers what an answer said about `namespace`'s version (a newer one is read as this release's). */
function learn(namespace: NamespaceLike, version: number): void {
  const capped = Math.min(version, ENVELOPE_VERSION);
  if (capped === ENVELOPE_VERSION) learnt.delete(namespace);
  else learnt.set(namespace, capped);
}

/**
 * The first option of `options` that `wire` does not know, if any; `wire`
 * and `relaysAbort` aside, which optionsFor writes in the older form.
 */
export function optionBeyond(options: ExecuteOptions, wire: number): string | undefined {
  if (wire >= ENVELOPE_VERSION) return undefined; // this release's wire knows every option
  for (const key in options) {
    if (key !== 'wire' && key !== 'relaysAbort' && OPTION_SINCE[key as keyof ExecuteOptions] > wire) return key;
  }
  return undefined;
}

/**
 * `options` as a limiter Worker of `wire` reads them. The wire-4 form has no
 * `wire` key, and sends the abort relay as its own function, `whenAborted`,
 * since that object never asks the callback.
 */
export function optionsFor(options: ExecuteOptions, wire: number, relay: AbortRelay): ExecuteOptions {
  if (wire >= 5) return options;
  const { wire: _newer, relaysAbort: _relays, ...older } = options;
  return { ...older, whenAborted: relay.whenAborted };
}

/**
 * What one answer of execute is (the answer itself stays with the caller, so
 * reading it allocates nothing):
 * - `settled`: the object's envelope, a SettledCall (a verdict, or a success wrapped);
 * - `value`: the value itself (a success on the wire-5 form, or a plain test
 *   double's answer);
 * - `report`: the very CallReport the callback returned, handed back by a
 *   plain test double whose execute returns what the callback resolved to;
 * - `older`: a wire-4 limiter Worker refused the wire-5 form (nothing taken,
 *   the callback not invoked): send it again in the wire-4 form.
 */
export type Reading = 'settled' | 'value' | 'report' | 'older';

/**
 * Reads `answer`, the resolution of an execute sent in the form of `wire`;
 * `trace` says whether the callback ran and what it last returned. Learns the namespace's version from a branded envelope and
 * from a wire-4 refusal.
 *
 * Why a value cannot be misread: a limiter Worker of wire 5 never answers a
 * value that could pass for an envelope (a value carrying WIRE_BRAND travels
 * wrapped); a wire-4 one, asked in the wire-5 form, only ever answers its
 * refusal of `wire`, and is asked in the wire-4 form only after that
 * refusal, when every answer is its `{ ok, ... }` envelope. What remains is a
 * hand-written double, whose answer is taken as the value unless it is the
 * callback's own report or it carries the brand on purpose.
 */
export function readAnswer(answer: unknown, wire: number, trace: AttemptTrace, namespace: NamespaceLike): Reading {
  if (typeof answer === 'object' && answer !== null) {
    const brand = (answer as Record<string, unknown>)[WIRE_BRAND];
    if (typeof brand === 'number' && Object.hasOwn(answer, WIRE_BRAND)) {
      if (brand !== wireOf(namespace)) learn(namespace, brand);
      return 'settled';
    }
    if (answer === trace.report) return 'report';
    if (typeof (answer as { ok?: unknown }).ok === 'boolean') {
      if (wire < 5) return 'settled';
      // Only before the callback ran: a wire-4 object refuses the options first.
      if (!trace.started && refusesWire(answer as SettledCall)) {
        learn(namespace, 4);
        return 'older';
      }
    }
  }
  return 'value';
}

/** A wire-4 limiter Worker's refusal of the `wire` option, as it words it. */
function refusesWire(answer: SettledCall): boolean {
  if (answer.ok || answer.error?.id !== 'invalid-argument') return false;
  return typeof answer.error.message === 'string' && answer.error.message.includes('unknown key "wire"');
}
