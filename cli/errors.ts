/**
 * The CLI's two failures: a problem to report (exit 1 unless said otherwise)
 * and a question nobody is there to answer.
 */

/**
 * A failure the CLI reports as its last words, without a stack trace.
 *
 * @example
 * throw new CliError('durable-rate-limiter.limits.jsonc: 2 problems\n  - ...');
 */
export class CliError extends Error {
  /** The process exit code: 1 for a failure, 130 for a cancelled prompt. */
  readonly exitCode: number;

  constructor(message: string, exitCode = 1) {
    super(message);
    this.name = 'CliError';
    this.exitCode = exitCode;
  }
}

/**
 * A question asked with no terminal to answer it (stdin is not a TTY). The
 * message names the flag or environment variable that answers it instead,
 * so CI fails at once rather than hanging on a pipe.
 *
 * @example
 * throw new MissingAnswerError('Where does the limiter answer?', 'pass --url <origin>');
 */
export class MissingAnswerError extends CliError {
  /** The flag or variable that would have answered, e.g. `--url <origin>`. */
  readonly answeredBy: string;

  constructor(question: string, answeredBy: string) {
    super(`${question}\n  stdin is not a terminal, so nobody can answer this here: ${answeredBy}`);
    this.name = 'MissingAnswerError';
    this.answeredBy = answeredBy;
  }
}
