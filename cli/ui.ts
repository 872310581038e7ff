/**
 * Everything the CLI says and asks, through @clack/prompts. A question
 * either has a terminal to ask on, a default that `--yes` takes, or fails at
 * once naming the flag or variable that answers it (MissingAnswerError).
 */
import { styleText } from 'node:util';
import * as clack from '@clack/prompts';
import { CliError, MissingAnswerError } from './errors.ts';

/** How to answer a question without a terminal, e.g. `pass --url <origin>`. */
type AnsweredBy = { answeredBy: string };

export interface TextQuestion extends AnsweredBy {
  message: string;
  /** Taken by `--yes` and by an empty answer. Without one, `--yes` cannot answer. */
  defaultValue?: string;
  /** Returns the problem with an answer, or undefined when it is fine. */
  validate?: (value: string) => string | undefined;
}

export interface ChoiceQuestion<T extends string> extends AnsweredBy {
  message: string;
  options: { value: T; label: string; hint?: string }[];
  defaultValue: T;
}

export interface ConfirmQuestion extends AnsweredBy {
  message: string;
  defaultValue: boolean;
}

/**
 * The CLI's voice. `interactive` is whether stdin is a terminal; `yes` takes
 * every default without asking.
 *
 * @example
 * const ui = createUi({ yes: false });
 * const url = await ui.text({ message: 'Where does the limiter answer?', answeredBy: 'pass --url <origin>' });
 */
export interface Ui {
  readonly interactive: boolean;
  readonly yes: boolean;
  intro(title: string): void;
  outro(message: string): void;
  info(message: string): void;
  success(message: string): void;
  warn(message: string): void;
  step(message: string): void;
  /** A titled block: a file's content, a list of commands. */
  note(message: string, title: string): void;
  text(question: TextQuestion): Promise<string>;
  password(question: AnsweredBy & { message: string }): Promise<string>;
  select<T extends string>(question: ChoiceQuestion<T>): Promise<T>;
  confirm(question: ConfirmQuestion): Promise<boolean>;
  /** Runs `work` under a spinner on a terminal, or between two log lines elsewhere. */
  spin<T>(message: string, work: () => Promise<T>, done?: (value: T) => string): Promise<T>;
}

function answered<T>(value: T): Exclude<T, symbol> {
  if (clack.isCancel(value)) throw new CliError('Cancelled: nothing more was done.', 130);
  return value as Exclude<T, symbol>;
}

/**
 * Creates the CLI's voice for this process. Colours are off whenever stdout
 * is not a terminal (NO_COLOR is set for this process and what it runs).
 *
 * @example
 * const ui = createUi({ yes: args.yes });
 */
export function createUi(options: { yes: boolean }): Ui {
  const interactive = Boolean(process.stdin.isTTY);
  if (!process.stdout.isTTY) process.env.NO_COLOR ??= '1';
  const yes = options.yes;

  /** A question without a default under --yes, or with nobody to ask. */
  const unanswerable = (message: string, answeredBy: string, hasDefault: boolean): boolean => {
    if (yes && hasDefault) return false;
    if (!interactive) throw new MissingAnswerError(message, answeredBy);
    return false;
  };

  return {
    interactive,
    yes,
    intro: (title) => clack.intro(title),
    outro: (message) => clack.outro(message),
    info: (message) => clack.log.info(message),
    success: (message) => clack.log.success(message),
    warn: (message) => clack.log.warn(message),
    step: (message) => clack.log.step(message),
    // Not clack's note: it wraps at the terminal's width (80 columns off a
    // terminal), which would break file contents and commands mid-line.
    note: (message, title) => {
      clack.log.step(title);
      const bar = styleText('gray', '│');
      process.stdout.write(
        `${message
          .split('\n')
          .map((line) => `${bar}    ${line}`.trimEnd())
          .join('\n')}\n`,
      );
    },

    async text({ message, defaultValue, validate, answeredBy }) {
      unanswerable(message, answeredBy, defaultValue !== undefined);
      if (yes && defaultValue !== undefined) {
        clack.log.step(`${message} ${defaultValue}`);
        return defaultValue;
      }
      const value = answered(
        await clack.text({
          message,
          ...(defaultValue !== undefined ? { defaultValue, placeholder: defaultValue } : {}),
          validate: (raw) => {
            const candidate = raw === undefined || raw === '' ? (defaultValue ?? '') : raw;
            if (candidate === '') return 'An answer is needed.';
            return validate?.(candidate);
          },
        }),
      );
      return value === '' || value === undefined ? (defaultValue ?? '') : value;
    },

    async password({ message, answeredBy }) {
      unanswerable(message, answeredBy, false);
      return answered(await clack.password({ message, validate: (v) => (v ? undefined : 'An answer is needed.') }));
    },

    async select({ message, options, defaultValue, answeredBy }) {
      unanswerable(message, answeredBy, true);
      if (yes) {
        clack.log.step(`${message} ${options.find((o) => o.value === defaultValue)?.label ?? defaultValue}`);
        return defaultValue;
      }
      const chosen = await clack.select({
        message,
        options: options.map((o) => ({ value: o.value, label: o.label, ...(o.hint ? { hint: o.hint } : {}) })) as never,
        initialValue: defaultValue,
      });
      return answered(chosen) as typeof defaultValue;
    },

    async confirm({ message, defaultValue, answeredBy }) {
      unanswerable(message, answeredBy, true);
      if (yes) {
        clack.log.step(`${message} ${defaultValue ? 'yes' : 'no'} (--yes)`);
        return defaultValue;
      }
      return answered(await clack.confirm({ message, initialValue: defaultValue }));
    },

    async spin(message, work, done) {
      if (!process.stdout.isTTY) {
        clack.log.step(`${message}...`);
        const value = await work();
        clack.log.success(done ? done(value) : `${message}: done`);
        return value;
      }
      const spinner = clack.spinner();
      spinner.start(message);
      try {
        const value = await work();
        spinner.stop(done ? done(value) : `${message}: done`);
        return value;
      } catch (error) {
        spinner.error(`${message}: failed`);
        throw error;
      }
    },
  };
}
