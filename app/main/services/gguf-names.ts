// Rules about GGUF file names: split shards (`name-00001-of-00003.gguf`, as
// llama-gguf-split writes them) are one model; the quantization a name states
// (Q4_K_M, IQ2_XXS, …); and which names from elsewhere (the Hugging Face Hub)
// may become a file in the models folder: a plain *.gguf base name, nothing
// that climbs out of the folder or hides.

export interface ShardName {
  /** The name without `-0000k-of-0000n.gguf`. */
  stem: string;
  /** 1-based. */
  index: number;
  count: number;
}

const shardPattern = /^(.+)-(\d{5})-of-(\d{5})\.gguf$/i;

export function parseShardName(name: string): ShardName | null {
  const m = shardPattern.exec(name);
  if (!m) return null;
  const index = Number(m[2]);
  const count = Number(m[3]);
  if (index < 1 || count < 1 || index > count) return null;
  return { stem: m[1]!, index, count };
}

/** The name of shard `index` of a split model whose first shard is `first`. */
export function shardFileName(shard: ShardName, index: number): string {
  const pad = (n: number) => String(n).padStart(5, "0");
  return `${shard.stem}-${pad(index)}-of-${pad(shard.count)}.gguf`;
}

const quantPattern = /(?:^|[-_.])((?:UD-)?(?:IQ[1-4]_(?:XXS|XS|NL|S|M)|Q[2-8]_K(?:_(?:XL|S|M|L))?|Q[4-8]_[01]|TQ[12]_0|MXFP4(?:_MOE)?|BF16|F16|F32))(?=[-_.]|$)/i;

/** The quantization a file name states ("Q4_K_M"), upper case, or null. */
export function quantOfName(name: string): string | null {
  const base = name.replace(/\.gguf$/i, "").replace(/-\d{5}-of-\d{5}$/i, "");
  const m = quantPattern.exec(base);
  return m ? m[1]!.toUpperCase() : null;
}

/**
 * Why `name` cannot be a file of the models folder, or null when it can: a
 * base name (no / or \), not hidden, no control characters, at most 200
 * characters, ending in .gguf.
 */
export function unsafeModelFileName(name: string): string | null {
  if (name.length === 0 || name.length > 200) return "the name is empty or longer than 200 characters";
  if (/[/\\]/.test(name)) return "the name has a folder in it";
  if (name === "." || name === ".." || name.startsWith(".")) return "the name starts with a dot";
  if (/[\u0000-\u001f\u007f]/.test(name)) return "the name has control characters";
  if (/[<>:"|?*]/.test(name)) return "the name has characters that Windows does not allow in file names";
  if (!/\.gguf$/i.test(name)) return "only .gguf files go into the models folder";
  return null;
}
