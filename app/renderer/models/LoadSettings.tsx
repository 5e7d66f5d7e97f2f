// The load settings every Load button on the Models page uses: CPU settings,
// a GPU group that only matters with a CUDA build on a machine with a GPU, and
// speculative decoding (the defaults of every reply with the model).
// Each field's error is the list item under the form, attached to its input
// (aria-describedby + aria-invalid), so a screen reader reads it with the field.
import { draftFieldsApply, gpuFieldsApply, type DeviceChoice, type LoadSettingsField, type LoadSettingsForm, type ParsedLoadSettings } from "./load-settings.js";

interface Props {
  form: LoadSettingsForm;
  /** Where the current model runs ("runs on the CPU: this build has no CUDA backend"), when one is loaded. */
  currentDevice: string | null;
  errors: string[];
  fieldErrors: ParsedLoadSettings["fieldErrors"];
  onChange(form: LoadSettingsForm): void;
}

const errorId = (field: LoadSettingsField) => `load-settings-error-${field}`;

export function LoadSettings({ form, currentDevice, errors, fieldErrors, onChange }: Props) {
  const set = <K extends keyof LoadSettingsForm>(key: K, value: LoadSettingsForm[K]) => onChange({ ...form, [key]: value });
  const gpuOn = gpuFieldsApply(form);
  const draftOn = draftFieldsApply(form);
  /** The attributes that tie a field to its error, when it has one. */
  const described = (field: LoadSettingsField) =>
    fieldErrors[field] !== undefined ? { "aria-invalid": true, "aria-describedby": errorId(field) } : {};
  const fieldOf = (text: string) => (Object.keys(fieldErrors) as LoadSettingsField[]).find((f) => fieldErrors[f] === text);
  return (
    <div className="load-settings" data-testid="load-settings">
      <div className="settings-row">
        <label>Threads
          <input value={form.threads} onChange={(e) => set("threads", e.target.value)} placeholder="all cores" inputMode="numeric" aria-label="Threads" {...described("threads")} />
        </label>
        <label>Context (tokens)
          <input value={form.contextSize} onChange={(e) => set("contextSize", e.target.value)} placeholder="model default" inputMode="numeric" aria-label="Context size" {...described("contextSize")} />
        </label>
        <label>KV cache
          <select value={form.kvCacheType} onChange={(e) => set("kvCacheType", e.target.value as LoadSettingsForm["kvCacheType"])} aria-label="KV cache precision">
            <option value="">default (f16)</option>
            <option value="f16">f16</option>
            <option value="f32">f32</option>
          </select>
        </label>
      </div>
      <fieldset className="gpu-group" data-testid="gpu-settings">
        <legend>GPU</legend>
        <p className="fine-print" data-testid="gpu-hint">Only used by a CUDA build on a machine with an NVIDIA GPU; elsewhere the model runs on the CPU
          (and asking for a CUDA device fails the load). Experts beyond the budget stay in RAM and the CPU computes them,
          unless peer GPUs (e.g. cuda:1,cuda:2) cache some of them, each in a budget of its own.
          {currentDevice && <> The current model {currentDevice}.</>}</p>
        <div className="settings-row">
          <label>Device
            <select value={form.device} onChange={(e) => set("device", e.target.value as DeviceChoice)} aria-label="Device">
              <option value="auto">Auto (GPU if usable)</option>
              <option value="cpu">CPU</option>
              <option value="cuda">CUDA device…</option>
            </select>
          </label>
          {form.device === "cuda" && (
            <label>Device number
              <input value={form.cudaDevice} onChange={(e) => set("cudaDevice", e.target.value)} inputMode="numeric" aria-label="CUDA device number" {...described("cudaDevice")} />
            </label>
          )}
          <label>Memory budget (GiB)
            <input value={gpuOn ? form.gpuBudgetGiB : ""} onChange={(e) => set("gpuBudgetGiB", e.target.value)} disabled={!gpuOn}
              placeholder="free − 1 GiB" inputMode="decimal" aria-label="GPU memory budget (GiB)" {...described("gpuBudgetGiB")} />
          </label>
          <label className="check">
            <input type="checkbox" checked={gpuOn && form.expertsOnCpu} disabled={!gpuOn} onChange={(e) => set("expertsOnCpu", e.target.checked)} />
            Compute all experts on the CPU <small>(dense weights and KV cache on the GPU)</small>
          </label>
        </div>
        <div className="settings-row">
          <label>Peer GPUs
            <input value={gpuOn ? form.gpuPeers : ""} onChange={(e) => set("gpuPeers", e.target.value)} disabled={!gpuOn}
              placeholder="cuda:1,cuda:2" aria-label="Peer GPUs" {...described("gpuPeers")} />
          </label>
          <label>Peer budget (GiB)
            <input value={gpuOn ? form.gpuPeerBudgetGiB : ""} onChange={(e) => set("gpuPeerBudgetGiB", e.target.value)} disabled={!gpuOn}
              placeholder="free − 1 GiB" inputMode="decimal" aria-label="Peer budget (GiB)" {...described("gpuPeerBudgetGiB")} />
          </label>
        </div>
      </fieldset>
      <fieldset className="draft-group" data-testid="draft-settings">
        <legend>Speculative decoding</legend>
        <p className="fine-print" data-testid="draft-hint">A model with an MTP (nextn) block (glm4moe models today) can draft a few
          tokens ahead that one pass of the model then checks together, on the CPU. Greedy replies are the same either way;
          Auto drafts where the model can, MTP insists (the load is refused without one).</p>
        <div className="settings-row">
          <label>Drafts
            <select value={form.draft} onChange={(e) => set("draft", e.target.value as LoadSettingsForm["draft"])} aria-label="Speculative drafts">
              <option value="">default (Auto)</option>
              <option value="auto">Auto (the MTP block when the model has one)</option>
              <option value="mtp">MTP (required)</option>
              <option value="none">None</option>
            </select>
          </label>
          <label>Window size
            <input value={draftOn ? form.specMax : ""} onChange={(e) => set("specMax", e.target.value)} disabled={!draftOn}
              placeholder="4" inputMode="numeric" aria-label="Speculative window size" {...described("specMax")} />
          </label>
          <label>Draft min p
            <input value={draftOn ? form.specMinP : ""} onChange={(e) => set("specMinP", e.target.value)} disabled={!draftOn}
              placeholder="0" inputMode="decimal" aria-label="Draft min p" {...described("specMinP")} />
          </label>
          <label>Window rule
            <select value={draftOn ? form.specRule : ""} onChange={(e) => set("specRule", e.target.value as LoadSettingsForm["specRule"])} disabled={!draftOn}
              aria-label="Speculative window rule">
              <option value="">default (cost)</option>
              <option value="cost">cost: draft while it pays</option>
              <option value="confidence">confidence: while the head is sure</option>
            </select>
          </label>
        </div>
      </fieldset>
      {errors.length > 0 && (
        <ul className="form-errors" role="status" data-testid="load-settings-errors">
          {errors.map((e) => {
            const field = fieldOf(e);
            return <li key={e} {...(field ? { id: errorId(field) } : {})}>{e}</li>;
          })}
        </ul>
      )}
    </div>
  );
}
