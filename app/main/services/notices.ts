// The app's notices: things the user must be told once (a damaged chat
// database was replaced, the chat runs in memory). Each is written as one
// warning line where the process reports (stderr for `guild serve` and web
// mode) when it is raised, and kept for the renderer (notices.list, the
// `notices.changed` event) until the user dismisses it.
import { randomUUID } from "node:crypto";

import type { AppNotice, EventSink, NoticeService } from "../../shared/app-contract.js";

export type WarningWriter = (line: string) => void;

/** One `guild: warning: …` line on stderr. */
export const stderrWarning: WarningWriter = (line) => {
  process.stderr.write(`guild: warning: ${line}\n`);
};

export class NoticeBoard implements NoticeService {
  private readonly open: AppNotice[] = [];

  constructor(private readonly warn: WarningWriter, private readonly emit: EventSink) {}

  /** Raises a notice: the warning line now, the renderer's copy until dismissed. */
  add(message: string): AppNotice {
    const notice: AppNotice = { id: randomUUID(), level: "warning", message };
    this.open.push(notice);
    try {
      this.warn(message);
    } catch {
      // a closed stderr does not lose the notice
    }
    this.changed();
    return notice;
  }

  async list(): Promise<AppNotice[]> {
    return [...this.open];
  }

  async dismiss(req: { id: string }): Promise<{ dismissed: boolean }> {
    const i = this.open.findIndex((n) => n.id === req.id);
    if (i < 0) return { dismissed: false };
    this.open.splice(i, 1);
    this.changed();
    return { dismissed: true };
  }

  private changed(): void {
    this.emit("notices.changed", { notices: [...this.open] });
  }
}
