// Ctrl-C: the first one aborts the running operation (so output ends cleanly,
// e.g. with a `done` event whose stop_reason is "cancel"); a second one exits.
import { exitInterrupted } from "./errors.js";

export class Interrupt {
  private controller = new AbortController();
  private count = 0;
  /** What Ctrl-C does; also called by readline, which sees Ctrl-C on a raw terminal. */
  readonly handler = (): void => {
    this.count++;
    if (this.count > 1) process.exit(exitInterrupted);
    this.controller.abort(new DOMException("interrupted", "AbortError"));
  };

  constructor() {
    process.on("SIGINT", this.handler);
    process.on("SIGTERM", this.handler);
  }

  /** Aborts when Ctrl-C is pressed (or SIGTERM arrives). */
  get signal(): AbortSignal {
    return this.controller.signal;
  }

  get interrupted(): boolean {
    return this.count > 0;
  }

  /** A fresh signal for the next operation (interactive chat: one per reply). */
  rearm(): void {
    this.count = 0;
    this.controller = new AbortController();
  }

  dispose(): void {
    process.off("SIGINT", this.handler);
    process.off("SIGTERM", this.handler);
  }
}
