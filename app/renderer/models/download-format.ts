// Words for a download's progress: "1.2 GiB of 4.0 GiB · 12.5 MiB/s · about 4 min left".
import type { DownloadInfo } from "../../shared/app-contract.js";
import { formatBytes } from "../common/format.js";

export function formatEta(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) return "";
  if (seconds < 60) return `${Math.max(1, Math.round(seconds))} s left`;
  if (seconds < 3600) return `about ${Math.round(seconds / 60)} min left`;
  const h = Math.floor(seconds / 3600);
  return `about ${h} h ${Math.round((seconds - h * 3600) / 60)} min left`;
}

export function progressText(d: DownloadInfo): string {
  const parts = [`${formatBytes(d.receivedBytes)} of ${formatBytes(d.totalBytes)}`];
  if (d.files > 1) parts.push(`file ${d.fileIndex} of ${d.files}`);
  if (d.state === "downloading" && d.bytesPerSecond > 0) parts.push(`${formatBytes(d.bytesPerSecond)}/s`);
  if (d.state === "downloading" && d.etaSeconds !== null) parts.push(formatEta(d.etaSeconds));
  return parts.join(" · ");
}

export const stateLabel: Record<DownloadInfo["state"], string> = {
  queued: "Waiting", downloading: "Downloading", verifying: "Checking", done: "Done", failed: "Failed", cancelled: "Cancelled",
};
