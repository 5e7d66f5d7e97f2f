// stdout that survives a closed pipe (`guild run ... | head`): after EPIPE (or
// any write error) the writes are dropped and `closed` tells the command to stop early.
import type { Writable } from "node:stream";

export class Output {
  private isClosed = false;
  private readonly listeners: (() => void)[] = [];

  constructor(private readonly stream: Writable = process.stdout) {
    // EPIPE (the reader went away) or any other write error: stop writing.
    stream.on("error", () => {
      this.isClosed = true;
      for (const fn of this.listeners.splice(0)) fn();
    });
  }

  get closed(): boolean {
    return this.isClosed;
  }

  /** Runs `fn` once the reader goes away. */
  onClose(fn: () => void): void {
    if (this.isClosed) fn();
    else this.listeners.push(fn);
  }

  write(data: string | Uint8Array): void {
    if (!this.isClosed) this.stream.write(data);
  }

  line(text: string): void {
    this.write(text + "\n");
  }

  /** Resolves when everything written so far has been handed to the OS. */
  flush(): Promise<void> {
    if (this.isClosed || !this.stream.writableNeedDrain) return Promise.resolve();
    return new Promise((resolve) => {
      const done = (): void => {
        this.stream.off("drain", done);
        resolve();
      };
      this.stream.on("drain", done);
      this.onClose(done);
    });
  }
}
