/**
 * One run's notebook: its plan, every caller's call records and the events
 * the harness marked (a restart). Callers write their records here when
 * their share ends; /report/:id reads them back.
 */
import { DurableObject } from 'cloudflare:workers';
import type { RunPlan } from '../../shared/plan.ts';
import type { CallRecord, RunEvent } from '../../shared/report.ts';

export class ProbeDO extends DurableObject<Env> {
  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    const sql = ctx.storage.sql;
    sql.exec(`CREATE TABLE IF NOT EXISTS plan (id INTEGER PRIMARY KEY CHECK (id = 1), json TEXT NOT NULL)`);
    sql.exec(`CREATE TABLE IF NOT EXISTS records (id TEXT PRIMARY KEY, json TEXT NOT NULL) WITHOUT ROWID`);
    sql.exec(`CREATE TABLE IF NOT EXISTS events (at INTEGER NOT NULL, what TEXT NOT NULL)`);
  }

  setPlan(plan: RunPlan): void {
    this.ctx.storage.sql.exec(`INSERT OR REPLACE INTO plan (id, json) VALUES (1, ?)`, JSON.stringify(plan));
  }

  plan(): RunPlan | null {
    const row = this.ctx.storage.sql.exec<{ json: string }>(`SELECT json FROM plan WHERE id = 1`).toArray()[0];
    return row ? (JSON.parse(row.json) as RunPlan) : null;
  }

  addRecords(records: CallRecord[]): number {
    for (const r of records)
      this.ctx.storage.sql.exec(`INSERT OR REPLACE INTO records (id, json) VALUES (?, ?)`, r.id, JSON.stringify(r));
    return records.length;
  }

  records(): CallRecord[] {
    return this.ctx.storage.sql
      .exec<{ json: string }>(`SELECT json FROM records`)
      .toArray()
      .map((row) => JSON.parse(row.json) as CallRecord);
  }

  addEvent(event: RunEvent): void {
    this.ctx.storage.sql.exec(`INSERT INTO events (at, what) VALUES (?, ?)`, event.at, event.what);
  }

  events(): RunEvent[] {
    return this.ctx.storage.sql
      .exec<{ at: number; what: string }>(`SELECT at, what FROM events ORDER BY at`)
      .toArray()
      .map((row) => ({ at: row.at, what: row.what }));
  }
}
