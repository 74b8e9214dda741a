// Where a long command is: on a terminal one line that updates in place (the step and its seconds so far), off
// one a plain line a step (the seconds are since the command began), so a log or a CI run reads the same steps in order. Always on stderr: stdout stays
// the command's result (one JSON document under --json). build/progress.mjs is the same for the build scripts.
import { PROGRESS_REDRAW_MS } from "../defaults.ts";

export interface Progress {
  /** Says the step now under way. */
  step(text: string): void;
  /** Clears the updating line (a terminal) before the result is printed. */
  clear(): void;
}

export function progress(prefix: string, stream: NodeJS.WriteStream = process.stderr): Progress {
  const tty = stream.isTTY === true;
  let text: string | null = null;
  const since = Date.now();
  let timer: NodeJS.Timeout | undefined;
  const width = () => Math.max(20, (stream.columns || 80) - 1);
  const draw = () => {
    const line = `${prefix}: ${text} (${Math.floor((Date.now() - since) / 1000)} s)`;
    stream.write(`\r\x1b[K${line.slice(0, width())}`);
  };
  return {
    step(next) {
      if (!tty) {
        stream.write(`${prefix}: ${next}\n`);
        return;
      }
      text = next;
      draw();
      timer ??= setInterval(draw, PROGRESS_REDRAW_MS);
      timer.unref();
    },
    clear() {
      clearInterval(timer);
      timer = undefined;
      if (tty && text !== null) stream.write("\r\x1b[K");
      text = null;
    },
  };
}
