import { describe, expect, it } from "vitest";

import { draftFigures, draftFiguresText } from "./speculative-stats.js";

describe("draftFigures", () => {
  it("is the acceptance rate and tokens per window of a reply with drafts", () => {
    expect(draftFigures({ generatedTokens: 32, draftTokens: 79, acceptedDraftTokens: 4, windows: 28 })).toEqual({ acceptanceRate: 4 / 79, tokensPerWindow: 32 / 28 });
    expect(draftFiguresText({ generatedTokens: 32, draftTokens: 79, acceptedDraftTokens: 4, windows: 28 })).toBe("5% of drafts accepted · 1.14 tokens/window");
    expect(draftFiguresText({ generatedTokens: 10, draftTokens: 6, acceptedDraftTokens: 6, windows: 4 })).toBe("100% of drafts accepted · 2.50 tokens/window");
  });

  it("is null without drafts, or for stats recorded before drafts were", () => {
    expect(draftFigures({ generatedTokens: 32, draftTokens: 0, acceptedDraftTokens: 0, windows: 32 })).toBeNull();
    expect(draftFigures({ generatedTokens: 32 })).toBeNull();
    expect(draftFiguresText({ generatedTokens: 0, draftTokens: 3, acceptedDraftTokens: 0, windows: 0 })).toBeNull();
  });
});
