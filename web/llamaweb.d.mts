// Types of the browser entry of the llamaweb package (web/llamaweb.mjs).

/** A byte source as the wasm glue reads it: chunks on demand, never the whole file at once. */
export interface ByteSource {
  /** Total bytes. */
  size: number;
  /** A display name (optional). */
  name?: string;
  /** Exactly `length` bytes at `offset`. */
  read(offset: number, length: number): Promise<Uint8Array>;
}

/** What the device offers, as shown by the demo. */
export interface AdapterSummary {
  vendor: string;
  architecture: string;
  device: string;
  description: string;
  /** shader-f16 granted: the kernels' f16 variants can run. */
  f16: boolean;
  /** subgroups granted. */
  subgroups: boolean;
  subgroupMinSize?: number;
  subgroupMaxSize?: number;
  maxBufferSize: number;
  maxStorageBufferBindingSize: number;
  /** A CPU rasterizer posing as a GPU (SwiftShader, lavapipe, ...: isFallbackAdapter or its names). */
  software: boolean;
}

/** Facts of an open model: the GPU plan's (lw_wasm_model_info_json) or the CPU engine's
 * (lw_wasm_cpum_info_json); keys of the other engine are absent. */
export interface ModelInfo {
  arch: string;
  n_vocab: number;
  n_layer: number;
  n_embd: number;
  n_ctx: number;
  weightBytes: number;
  /** The KV cache's type, both engines (the kvType it was opened with; 'f16' by default). */
  kvType?: 'f16' | 'f32' | 'q8_0' | 'q4_0';
  /** WebGPU */
  kvBytes?: number;
  actBytes?: number;
  buffers?: number;
  pipelines?: number;
  bindGroups?: number;
  dispatches?: number;
  submits?: number;
  steps?: number;
  stepDispatches?: number;
  /** WebGPU: ids picked on the GPU under a grammar's mask (constrained steps that read back only the id) */
  maskedSteps?: number;
  /** CPU engine: tokens per prompt step, threads running (and asked for), KV cache + activations bytes */
  n_batch?: number;
  threads?: number;
  threadsWanted?: number;
  contextBytes?: number;
}

/** Which engine runs a model: 'auto' (WebGPU where it works, the CPU engine without it, for files above
 * softwareAdapterMaxBytes on a software adapter, and for a model WebGPU fails to open), 'webgpu', 'cpu'. */
export type DeviceChoice = 'auto' | 'webgpu' | 'cpu';

export interface LoadOptions {
  /** Default 'auto'; 'webgpu' rejects with GPU_UNAVAILABLE without a device; 'cpu' asks for no device. */
  device?: DeviceChoice;
  /** CPU engine threads (default: cross-origin isolated pages half the processors, at least 2 where there are
   * 2, at most 4; else 1); more than one runs the threaded build (wasm/mt/), which needs COOP/COEP headers on
   * the page. */
  threads?: number;
  /** device 'auto' on a software adapter: files up to this size stay on WebGPU (default 0: none). */
  softwareAdapterMaxBytes?: number;
  /** Folder holding the wasm builds: llamaweb-wasm.js/.wasm and mt/ (default: wasm/ next to llamaweb.mjs). */
  wasmBase?: string | URL;
  /** Passed to navigator.gpu.requestAdapter (default: high-performance). */
  adapterOptions?: GPURequestAdapterOptions;
  print?: (line: string) => void;
  printErr?: (line: string) => void;
}

export interface OpenOptions {
  /** This model's engine (default: the Llamaweb's device choice). */
  device?: DeviceChoice;
  /** CPU engine threads (default: the Llamaweb's). */
  threads?: number;
  /** KV cache cells (default 2048). */
  nCtx?: number;
  /** Tokens per prompt step. */
  nBatch?: number;
  /** 0/1: force the f16 kernels off/on (default: as the device offers). */
  f16?: number;
  /** 0/1: force the subgroup kernels off/on (default: as the device offers). */
  subgroups?: number;
  /** An f32 KV cache instead of f16. */
  kvF32?: boolean;
  /** The KV cache type: 'f16' (default), 'f32', or llama.cpp's quantized 'q8_0' / 'q4_0' (half and 0.28 of
   * f16's bytes on the CPU engine; on WebGPU, in word-aligned layouts of its own, 36 and 20 bytes per 32
   * elements: 0.56 and 0.31; head sizes of multiples of 32 on both). */
  kvType?: 'f16' | 'f32' | 'q8_0' | 'q4_0';
  /** Kernel overrides (the JSON node web/tune.mjs prints, or an object), where the engine takes them. */
  tune?: string | object;
  /** WebGPU: the row store keeps only `embeddings` token embedding rows on the GPU (an LRU cache; misses read
   * from the model's source); tokens are identical. Where it cannot (tied output projection, the CPU engine)
   * the table is resident and model.rowsFallback says why. */
  rows?: { embeddings?: number };
  /** First prefetch of the GGUF header (default 256 KiB; grows as the header needs). */
  headBytes?: number;
  /** Bytes done of total in a phase: 'download' (a URL: bytes of it in the model cache), 'cache-write'
   * (bytes committed to OPFS, once a part), 'verify' (a SHA-256 checked after the download), 'upload' (the
   * file read while the weights stream into place: on a cold cache together with the download, one network
   * pass), 'ready' (once, at the end); state: every phase's latest numbers. */
  onProgress?: (done: number, total: number, phase: ProgressPhase, state: ProgressState) => void;
  /** Stops the download and the load: open() rejects with code ABORTED and frees what it made. */
  signal?: AbortSignal;
  /** Chunks (lwGpu.chunkBytes, 8 MiB) read and not yet acknowledged by the GPU queue, at most (default 4). */
  maxInFlight?: number;
  /** Tries after a failed chunk read, with exponential backoff (default 3); for a URL through the cache also
   * the download's failures in a row per part (default 5). */
  retries?: number;
  /** WebGPU: after the upload, every weight byte is read back from its GPU buffer and compared with the file
   * read again (model.uploadCheck); a difference fails open() (GPU_UNAVAILABLE). */
  verifyUpload?: boolean;
  /** A URL through the OPFS model cache (default true where the browser has OPFS; false: range requests). */
  cache?: boolean;
  /** Through the cache: false downloads the whole file into OPFS first and reads it back (default true: the
   * download streams into the engine as it is written). */
  stream?: boolean;
  /** Streaming: bytes held in memory for the engine at most, over every file (default 32 MiB; about 1.5x
   * this plus the reads in flight at the peak). */
  streamBytes?: number;
  /** The rest as cacheModel's (sha256, headers, revalidate, partBytes, parallel, retryDelayMs). */
  sha256?: CacheOptions['sha256'];
  headers?: Record<string, string>;
  revalidate?: boolean;
  partBytes?: number;
  parallel?: number;
  retryDelayMs?: number;
}

export type ProgressPhase = 'download' | 'cache-write' | 'verify' | 'upload' | 'ready';

/** Every phase's latest {done, total} (null: none yet) and the phase of this event. */
export interface ProgressState {
  phase: ProgressPhase;
  download: { done: number; total: number } | null;
  cacheWrite: { done: number; total: number } | null;
  verify: { done: number; total: number } | null;
  upload: { done: number; total: number } | null;
}

/** Where an open(url) got its bytes (Model.download; null when the file was in the cache, complete). */
/** The read-back check of an upload (open's verifyUpload). */
export interface UploadCheck {
  /** host-source writes checked (a tensor range each) */
  writes: number;
  /** bytes compared */
  bytes: number;
  /** of them, bytes at file offsets of 4 GiB or more */
  bytesPast4GiB: number;
  /** 8 MiB chunks that differ (open() throws when not 0) */
  mismatches: number;
  /** the first difference, or null */
  first: { srcOffset: number; buffer: string; offset: number } | null;
}

export interface DownloadStats {
  /** Bytes received from the network (each once: written to the cache and handed to the engine). */
  network: number;
  /** Bytes the engine read from what had just arrived, and from OPFS (parts complete before, or bytes it
   * asked for after they had left memory). */
  memory: number;
  cache: number;
  /** Most bytes held in memory for the engine at once. */
  peakHeld: number;
  /** Reads that waited for the download; failed requests tried again. */
  waits: number;
  retries: number;
  /** The largest piece the network handed over (the window moves by whole pieces). */
  maxChunk: number;
  streamed: boolean;
}

/** What a model holds (Model.memory()), bytes. */
export interface ModelMemory {
  device: 'webgpu' | 'cpu';
  /** The module's memory (wasm memory only grows: also its high-water). */
  wasmHeap: number;
  jsHeap: number | null;
  /** WebGPU: the model's live GPU buffers by kind (a software adapter keeps them in CPU memory). */
  gpu: { weights: number; kv: number; activations: number; params: number; total: number; buffers: number } | null;
  /** The CPU engine: its weights, and its context (KV cache and work buffers), in the wasm heap. */
  cpu: { weights: number | null; context: number | null } | null;
  /** The weight upload: ms, bytes, most chunks in flight, JS heap high-water. */
  load: { ms: number; bytes: number | null; peakInFlight: number | null; peakJsHeap: number | null };
  download: DownloadStats | null;
}

/** cacheModel's options. */
export interface CacheOptions {
  /** The file's SHA-256 (hex; for a split GGUF opened by URL, one per part in order), checked before the
   * entry is complete; the server's Repr-Digest / Digest is used when none is given. */
  sha256?: string | (string | null)[];
  /** Request headers (e.g. Authorization). */
  headers?: Record<string, string>;
  /** Ask the server whether a complete entry is still its file (size, ETag, Last-Modified). */
  revalidate?: boolean;
  /** Bytes per range request and part file (default 64 MiB). */
  partBytes?: number;
  /** Range requests at once (default 3). */
  parallel?: number;
  /** Failures in a row without progress, per part, before NETWORK (default 5). */
  retries?: number;
  /** First backoff after a failure, doubling up to 8 s (default 250). */
  retryDelayMs?: number;
  signal?: AbortSignal;
  onProgress?: (done: number, total: number, phase: 'download' | 'cache-write' | 'verify') => void;
}

/** An entry of the model cache (listCached). */
export interface CachedModel {
  url: string;
  /** The file's size, and the bytes of it in the cache now. */
  size: number;
  bytes: number;
  /** Every byte is there (and its SHA-256 checked when one was known); only complete entries are used. */
  complete: boolean;
  etag: string | null;
  lastModified: string | null;
  sha256: string | null;
  /** Date.now() when made and last used. */
  created: number;
  used: number;
}

/** The weight upload of an open(). */
export interface LoadStats {
  /** open + plan + upload, ms */
  ms: number;
  /** weight bytes streamed, in this many chunks */
  bytes: number;
  chunks: number;
  /** most chunks in flight at once (<= maxInFlight) */
  peakInFlight: number;
  /** chunk reads that failed and were tried again */
  retries: number;
  /** JS heap high-water during the upload, bytes (performance.memory / Node; 0 where unknown) */
  peakJsHeap: number;
}

/** What the package rejects with. A failed open() has freed everything it made; the page stays usable. */
export type LlamawebErrorCode =
  | 'GPU_UNAVAILABLE'   // no WebGPU, no adapter or device, or the device failed
  | 'UNSUPPORTED_MODEL' // the file was refused: not GGUF, corrupt, an architecture or format this build lacks
  | 'NOT_ENOUGH_MEMORY' // the wasm heap (or the address space) cannot hold what the model needs
  | 'NETWORK'           // the byte source failed (HTTP, a File read) after retries
  | 'QUOTA_EXCEEDED'    // browser storage (OPFS) is full
  | 'ABORTED'           // the AbortSignal fired, or had fired before the call (then nothing was done)
  | 'CONTEXT_FULL'      // the prompt does not fit the context
  | 'BAD_INPUT';        // an argument was refused (the message says which)

export class LlamawebError extends Error {
  constructor(code: LlamawebErrorCode | string, message: string, options?: { cause?: unknown; status?: number; statusText?: string });
  readonly code: LlamawebErrorCode | string;
  /** The C lw_status that caused it (include/llamaweb.h), or null. */
  readonly status: number | null;
  /** Its lw_status_str, or null. */
  readonly statusText: string | null;
  /** Anything thrown, as a LlamawebError with a public code (code: when nothing says better). */
  static from(e: unknown, code?: LlamawebErrorCode): LlamawebError;
}

export interface GenerateOptions {
  /** Most tokens to generate (default 128). */
  maxTokens?: number;
  /** Add BOS etc. as the vocabulary asks (default true). */
  addSpecial?: boolean;
  /** Go on from the previous generation (its last token, then this prompt, possibly '') instead of a fresh context. */
  keepContext?: boolean;
  /** Draw tokens (on the GPU or by the CPU sampler; the same seed, the same text); absent or temp <= 0: greedy. */
  sampling?: { temp: number; topK?: number; topP?: number; minP?: number; seed?: number };
  /** The text ends before the first of these (which is not part of it); reason 'stopString'. */
  stop?: string | string[];
  /** A fresh context that keeps the KV cache's cells the prompt begins with (fromCell of them). */
  reusePrefix?: boolean;
  /** Called with each piece of text as it is generated ('' while a UTF-8 character is incomplete or could
   * begin a stop string; id -1: text held back until the end). */
  onToken?: (text: string, id: number) => void;
  /** Ends the generation like Model.stop(); one already aborted rejects with ABORTED. */
  signal?: AbortSignal;
}

export interface GenerateResult {
  text: string;
  tokens: number[];
  promptTokens: number;
  promptMs: number;
  genMs: number;
  promptTokensPerSecond: number;
  /** Decode steps per second. */
  tokensPerSecond: number;
  /** Prompt ids decoded, and the cell they went to (reusePrefix: the cells before it were kept). */
  decodedTokens: number;
  fromCell: number;
  reason: 'eog' | 'length' | 'context' | 'stopped' | 'stopString';
}

/** One message of a conversation, as chat templates see it. */
export interface ChatMessage {
  /** 'system', 'user', 'assistant', ... as the template knows them. */
  role: string;
  content: string | null;
}

/** Model.newChat's options. */
export interface ChatOptions {
  /** System prompt (kept when the context fills up and the conversation starts over). */
  system?: string;
  /** A Jinja chat template instead of the model's; with neither, the plain "User: ...\nAssistant:" format. */
  template?: string;
  /** Control tokens' text is part of replies (default false). */
  special?: boolean;
}

/** Chat.send's options. */
export interface SendOptions {
  /** Most reply tokens (default 128). */
  maxTokens?: number;
  /** Draw tokens (the same seed, the same reply); absent or temp <= 0: greedy. */
  sampling?: { temp: number; topK?: number; topP?: number; minP?: number; seed?: number };
  /** The reply ends before the first of these (the conversation keeps the tokens generated). */
  stop?: string | string[];
  /** Keep the KV cache's cells the conversation begins with, whoever decoded them. */
  reusePrefix?: boolean;
  /** Called with each piece of the reply as it is generated (id -1: bytes of a character left incomplete). */
  onToken?: (text: string, id: number) => void;
  /** Ends the reply after the current token (as Model.stop()); the part joins the conversation. One
   * already aborted rejects with ABORTED. */
  signal?: AbortSignal;
}

export interface SendResult {
  /** The reply as the conversation keeps it (NUL characters included). */
  text: string;
  /** Reply token ids (an end-of-generation token excluded). */
  tokens: number[];
  /** Prompt ids decoded for this turn: the new part only while the GPU cache holds the conversation. */
  decodedTokens: number;
  /** The cell they went to: cells before it were reused from the cache. */
  fromCell: number;
  /** decodedTokens again, as GenerateResult names it. */
  promptTokens: number;
  /** The context was full: the conversation started over from the system prompt and this message. */
  restarted: boolean;
  /** The template rendered earlier text differently: decoding resumed at an earlier boundary. */
  resumed: boolean;
  reason: 'eog' | 'length' | 'context' | 'stopped' | 'stopString';
  promptMs: number;
  genMs: number;
  promptTokensPerSecond: number;
  /** Decode steps per second. */
  tokensPerSecond: number;
}

/** A conversation kept on a model (Model.newChat): each send() decodes only what the KV cache lacks. */
export class Chat {
  /** The template in use: the model's, the one given, or the plain format. */
  readonly template: 'model' | 'given' | 'plain';
  /** The user's message, answered; rejects (the conversation as before) when it cannot fit the context. */
  send(message: string, opts?: SendOptions): Promise<SendResult>;
  /** The conversation, system prompt first. */
  messages(): ChatMessage[];
  /** Token ids the KV cache holds for the conversation. */
  tokens(): number[];
  /** Adds a message without generating (a restored conversation); the next send() decodes it. */
  add(role: string, content: string): void;
  /** Back to the system prompt. */
  reset(): void;
  /** Releases the session (after the running send(), if any). */
  free(): void;
}

/** A conversation in the worker (WorkerModel.newChat): Chat's interface with promises. */
export interface WorkerChat {
  /** Known once the worker made it. */
  readonly template: 'model' | 'given' | 'plain' | undefined;
  send(message: string, opts?: SendOptions): Promise<SendResult>;
  messages(): Promise<ChatMessage[]>;
  tokens(): Promise<number[]>;
  add(role: string, content: string): Promise<void>;
  reset(): Promise<void>;
  free(): void;
}

// ---- the OpenAI-shaped API (web/lw-openai.mjs): model.chat.completions.create, model.completions.create ----

/** What both requests take. Other fields (model, n: 1, user, ...) are accepted and ignored. */
export interface CompletionRequestBase {
  /** Most tokens to generate (default: until the end of generation or a full context). */
  max_tokens?: number | null;
  max_completion_tokens?: number | null;
  /** 0..2, default 1; 0 is greedy. */
  temperature?: number | null;
  top_p?: number | null;
  /** 0: off (the GPU caps it at 256). */
  top_k?: number | null;
  min_p?: number | null;
  /** The same seed, the same text (default: random). */
  seed?: number | null;
  stop?: string | string[] | null;
  /** Rejects (or ends the stream) with ABORTED; one already aborted decodes nothing. */
  signal?: AbortSignal;
  stream?: boolean;
  model?: string;
  /** JSON (any value, or WebLLM's `schema` beside json_object) or JSON valid for a JSON Schema (src/grammar's
   * converter: llama.cpp's json-schema-to-grammar); a schema the converter refuses rejects with BAD_INPUT. */
  response_format?: { type: 'text' } | { type: 'json_object'; schema?: object | string } |
    { type: 'json_schema'; json_schema: { name?: string; schema: object; strict?: boolean } } | null;
  /** An extension (as llama.cpp's server): a GBNF grammar (llama.cpp's dialect) the reply must match. */
  grammar?: string | null;
  [other: string]: unknown;
}

/** An OpenAI tool call (arguments: the JSON text the model wrote). */
export interface ToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

export interface Tool {
  type: 'function';
  /** name: [a-zA-Z0-9_-]{1,64}; parameters: a JSON Schema object (the arguments' grammar). */
  function: { name: string; description?: string; parameters?: object };
}

export interface ChatCompletionMessage {
  role: 'system' | 'developer' | 'user' | 'assistant' | 'tool' | string;
  content: string | null | { type: 'text'; text: string }[];
  /** An assistant's calls (a conversation going on after them). */
  tool_calls?: ToolCall[];
  /** role 'tool': the call this is the result of. */
  tool_call_id?: string;
  name?: string;
}

export interface ChatCompletionRequest extends CompletionRequestBase {
  /** The conversation; the last message is the user's, or (with tools) a tool's result. */
  messages: ChatCompletionMessage[];
  /** Rendered into the model's chat template (its `tools`); replies are parsed for calls in the template's
   * convention (Hermes/Qwen <tool_call>, Llama 3 JSON, Mistral [TOOL_CALLS]). */
  tools?: Tool[] | null;
  /** 'auto' (default with tools: parsed), 'required' or a named function (the reply is constrained to calls
   * by a grammar from the tools' parameters), 'none' (tools are not shown). */
  tool_choice?: 'auto' | 'required' | 'none' | { type: 'function'; function: { name: string } } | null;
  /** Several calls in one reply (default true). */
  parallel_tool_calls?: boolean | null;
  /** An extension: the calls' convention (default: the chat template's, else Hermes). */
  tool_format?: 'auto' | 'hermes' | 'llama3' | 'mistral';
}

export interface CompletionRequest extends CompletionRequestBase {
  /** Text, [text] or token ids (BOS added as the vocabulary asks to text). */
  prompt: string | [string] | number[];
}

export interface CompletionUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  /** Prompt tokens the KV cache already held (not decoded again). */
  prompt_tokens_details: { cached_tokens: number };
}

export type FinishReason = 'stop' | 'length' | 'tool_calls';

export interface ChatCompletion {
  id: string;
  object: 'chat.completion';
  created: number;
  model: string;
  /** With tool calls: content is the text beside them (null when none) and finish_reason 'tool_calls'. */
  choices: { index: 0; message: { role: 'assistant'; content: string | null; tool_calls?: ToolCall[] }; logprobs: null;
    finish_reason: FinishReason }[];
  usage: CompletionUsage;
}

/** A streamed piece of a tool call, as OpenAI streams them: the first for a call (its index) has id, type and
 * function.name (arguments: the first piece, often ''), the next ones only function.arguments: pieces that
 * join to the call's. */
export interface ToolCallDelta {
  index: number;
  id?: string;
  type?: 'function';
  function: { name?: string; arguments: string };
}

/** A streamed piece: the first has delta.role, the last an empty delta, finish_reason and usage. With tools,
 * the text before the first call streams as content, then the calls as ToolCallDeltas while they are generated. */
export interface ChatCompletionChunk {
  id: string;
  object: 'chat.completion.chunk';
  created: number;
  model: string;
  choices: { index: 0; delta: { role?: 'assistant'; content?: string; tool_calls?: ToolCallDelta[] }; logprobs: null;
    finish_reason: FinishReason | null }[];
  usage?: CompletionUsage;
}

export interface Completion {
  id: string;
  object: 'text_completion';
  created: number;
  model: string;
  choices: { index: 0; text: string; logprobs: null; finish_reason: FinishReason | null }[];
  /** On the result, and on a stream's last chunk. */
  usage?: CompletionUsage;
}

export interface ChatCompletions {
  create(req: ChatCompletionRequest & { stream: true }): Promise<AsyncIterable<ChatCompletionChunk>>;
  create(req: ChatCompletionRequest & { stream?: false }): Promise<ChatCompletion>;
}

export interface Completions {
  create(req: CompletionRequest & { stream: true }): Promise<AsyncIterable<Completion>>;
  create(req: CompletionRequest & { stream?: false }): Promise<Completion>;
}

/** embeddings.create: OpenAI's request, and pooling / normalize (extensions). */
export interface EmbeddingRequest {
  /** Texts (BOS and control-token texts as `llamaweb embed` tokenizes them) or token ids. */
  input: string | string[] | number[] | number[][];
  encoding_format?: 'float' | 'base64';
  /** Only the model's n_embd (no other size is offered). */
  dimensions?: number;
  /** Default: the file's pooling_type, else mean. 'none': one vector per token, back to back. */
  pooling?: 'mean' | 'cls' | 'last' | 'none';
  /** llama.cpp's embd_normalize: 2 Euclidean (default), -1 none, 0 int16 range, 1 taxicab, p > 2 the p-norm. */
  normalize?: number;
  model?: string;
  signal?: AbortSignal;
}

export interface EmbeddingList {
  object: 'list';
  model: string;
  /** embedding: floats, or their little-endian float32 bytes in base64 (encoding_format 'base64'). */
  data: { object: 'embedding'; index: number; embedding: number[] | string }[];
  usage: { prompt_tokens: number; total_tokens: number };
}

export interface Embeddings {
  create(req: EmbeddingRequest): Promise<EmbeddingList>;
}

/** What LlamawebWorker.open can send to the worker. */
export type WorkerModelInput = Blob | string | URL | { opfs: string };

/** What Llamaweb.open accepts. */
export type ModelInput = Blob | string | URL | { opfs: string } | ByteSource
  /** the parts of a split GGUF (model-00001-of-00003.gguf, ...), in any order */
  | (Blob | string | URL | { opfs: string } | ByteSource)[];

/** Bytes of memory in use (Llamaweb.memory). */
export interface MemoryUse {
  /** The wasm heap: small on WebGPU whatever the model (weights live in GPU buffers); on the CPU engine it
   * holds the weights. */
  wasmHeap: number;
  /** Chrome's performance.memory.usedJSHeapSize where available, else null. */
  jsHeap: number | null;
}

/** The engine in a module Worker (Llamaweb.loadInWorker). */
export interface LlamawebWorker {
  /** null: no WebGPU device in the worker (gpuError says why). */
  readonly adapter: AdapterSummary | null;
  readonly preference: DeviceChoice;
  readonly gpuError: string | null;
  /** CPU engine threads by default. */
  readonly threads: number;
  readonly canSample: boolean;
  readonly inWorker: true;
  /** A URL, File/Blob, {opfs: name}, or an array of them (a split GGUF's parts, e.g. the Files a user picked). */
  open(what: WorkerModelInput | WorkerModelInput[], opts?: OpenOptions): Promise<WorkerModel>;
  memory(): Promise<MemoryUse>;
  /** Ends the worker and every model in it. */
  terminate(): void;
}

/** A model in the worker: Model's interface, its methods promises. */
export interface WorkerModel {
  readonly name: string;
  readonly device: 'webgpu' | 'cpu';
  readonly build?: 'threads' | 'single';
  readonly threadsError?: string | null;
  readonly gpuFailure?: string | null;
  readonly loadMs: number;
  readonly loadStats: LoadStats;
  /** opts.verifyUpload on WebGPU: the read-back check of the streamed weights, else null. */
  readonly uploadCheck: UploadCheck | null;
  readonly info: ModelInfo;
  readonly headBytes: number;
  readonly headTries: number;
  readonly chatTemplate: boolean;
  readonly chatError: string;
  readonly download: DownloadStats | null;
  memory(): Promise<ModelMemory>;
  generate(prompt: string | number[], opts?: GenerateOptions): Promise<GenerateResult>;
  /** chat(messages, opts) as Model's; chat.completions.create: the OpenAI-shaped call. */
  chat: ((messages: ChatMessage[], opts?: GenerateOptions) => Promise<GenerateResult>) & { completions: ChatCompletions };
  completions: Completions;
  /** embeddings.create: OpenAI's embeddings (the CPU engine's own embeddings context; on WebGPU the final norm's
   * rows, which overwrites the KV cache). */
  embeddings: Embeddings;
  renderChat(messages: ChatMessage[], addGenerationPrompt?: boolean): Promise<string>;
  tokenize(text: string, addSpecial?: boolean): Promise<number[]>;
  tokenizeSpecial(text: string, addSpecial?: boolean): Promise<number[]>;
  detokenize(ids: number[]): Promise<string>;
  /** A conversation kept in the worker (Model.newChat). */
  newChat(opts?: ChatOptions): WorkerChat;
  stream(prompt: string, opts?: GenerateOptions): AsyncGenerator<string, void, undefined>;
  stop(): void;
  free(): void;
}

export class Llamaweb {
  /** The wasm module and, as opts.device asks, a WebGPU device; device 'webgpu' rejects with
   * GPU_UNAVAILABLE (and a readable message) when WebGPU is missing. */
  static load(opts?: LoadOptions): Promise<Llamaweb>;
  /** The same engine in a module Worker (web/llamaweb-worker.mjs, or workerUrl). */
  static loadInWorker(opts?: LoadOptions & { workerUrl?: string | URL }): Promise<LlamawebWorker>;
  /** M: the wasm module; device: its WebGPU device (lwGpu.init done) or null (the CPU engine only). */
  constructor(M: any, device: GPUDevice | null, opts?: LoadOptions & { gpuError?: string });
  readonly Module: any;
  /** null: no WebGPU (gpuError says why): models run on the CPU engine. */
  readonly device: GPUDevice | null;
  readonly adapter: AdapterSummary | null;
  readonly gpuError: string | null;
  /** The device choice open() follows. */
  readonly preference: DeviceChoice;
  /** CPU engine threads by default. */
  readonly threads: number;
  /** Whether generate({sampling}) can draw tokens in this build. */
  readonly canSample: boolean;
  /** The engine open() would pick for a file of size bytes. */
  pick(size: number, opts?: { device?: DeviceChoice }): 'webgpu' | 'cpu';
  open(what: ModelInput, opts?: OpenOptions): Promise<Model>;
  memory(): MemoryUse;
}

/** Model.rowsStats(): the token embedding row store. */
export interface RowsStats {
  asked: boolean;
  active: boolean;
  status?: number;
  message?: string;
  nRows?: number;
  nSlots?: number;
  rowBytes?: number;
  lookups?: number;
  hits?: number;
  misses?: number;
  warmLoads?: number;
  evictions?: number;
  bytesRead?: number;
  /** Chained (GPU-resident) steps undone because their input row was not resident. */
  rewinds?: number;
  hitRate?: number | null;
  fallback: string | null;
}

export class Model {
  /** Where it runs: WebGPU or the CPU engine in the wasm heap. */
  readonly device: 'webgpu' | 'cpu';
  /** The source's name (the OpenAI objects' model). */
  readonly name: string;
  /** CPU engine: the wasm build running it, and why not the threaded one when threads were asked for. */
  readonly build?: 'threads' | 'single';
  readonly threadsError?: string | null;
  /** device 'auto': why WebGPU did not take it (the CPU engine did). */
  readonly gpuFailure?: string | null;
  /** Open + plan + weight upload, ms. */
  readonly loadMs: number;
  readonly loadStats: LoadStats;
  /** opts.verifyUpload on WebGPU: the read-back check of the streamed weights, else null. */
  readonly uploadCheck: UploadCheck | null;
  readonly info: ModelInfo;
  /** Header bytes that were prefetched, and in how many attempts. */
  readonly headBytes: number;
  readonly headTries: number;
  /** open(url) on a cold cache: where the bytes came from (null: the file was in the cache, or not a URL). */
  readonly download: DownloadStats | null;
  /** opts.rows asked for but the table is resident: why (said once, at open); else null. */
  readonly rowsFallback: string | null;
  /** The token embedding row store's counters (WebGPU) and fallback. */
  rowsStats(): RowsStats;
  /** GPU bytes by kind, wasm and JS heap, the upload's and download's peaks. */
  memory(): ModelMemory;
  /** The GGUF has a chat template this build renders (else chatError says why). */
  readonly chatTemplate: boolean;
  readonly chatError: string;
  tokenize(text: string, addSpecial?: boolean): number[];
  /** Control-token texts (<|user|>, <s>, ...) become their ids, as a rendered chat prompt needs. */
  tokenizeSpecial(text: string, addSpecial?: boolean): number[];
  detokenize(ids: number[]): string;
  /** The prompt text of a conversation by the model's chat template. */
  renderChat(messages: ChatMessage[], addGenerationPrompt?: boolean): string;
  /** chat(messages, opts): the assistant's reply by renderChat, tokenizeSpecial, generate (a fresh context);
   * chat.completions.create: the OpenAI-shaped call (a chat session; the plain format without a template). */
  chat: ((messages: ChatMessage[], opts?: GenerateOptions) => Promise<GenerateResult>) & { completions: ChatCompletions };
  /** completions.create: the OpenAI-shaped raw-prompt call. */
  completions: Completions;
  /** embeddings.create: OpenAI's embeddings (the CPU engine's own embeddings context; on WebGPU the final norm's
   * rows, which overwrites the KV cache). */
  embeddings: Embeddings;
  /** A conversation whose KV cache is kept across turns (any model: the plain format without a template). */
  newChat(opts?: ChatOptions): Chat;
  /** Generation from text or token ids, from a fresh context unless opts.keepContext. */
  generate(prompt: string | number[], opts?: GenerateOptions): Promise<GenerateResult>;
  /** generate() as an async iterator of text pieces; leaving the loop early stops the generation. */
  stream(prompt: string, opts?: GenerateOptions): AsyncGenerator<string, void, undefined>;
  /** Ends the running generation after the current token. */
  stop(): void;
  /** Releases the GPU buffers or the heap weights (after the running generation, if any). */
  free(): void;
}

export function blobSource(blob: Blob): ByteSource;
export function bytesSource(bytes: Uint8Array | ArrayBuffer): ByteSource;
export function urlSource(url: string | URL, opts?: { headers?: Record<string, string> }): Promise<ByteSource>;
export function opfsSource(name: string): Promise<ByteSource>;
export function listOpfs(): Promise<{ name: string; size: number }[]>;
export function downloadToOpfs(url: string | URL, name: string,
  opts?: { onProgress?: (done: number, total: number) => void; signal?: AbortSignal }): Promise<ByteSource>;
/** Downloads (or resumes) url into the OPFS model cache; resolves to the cached file. */
export function cacheModel(url: string | URL, opts?: CacheOptions): Promise<Blob>;
/** The model cache's entries, complete or not. */
export function listCached(): Promise<CachedModel[]>;
/** Removes url's entry (after a download of it in progress ends); whether there was one. */
export function deleteCached(url: string | URL): Promise<boolean>;
export function clearCache(): Promise<void>;
/** Whether this browser has OPFS (the cache's storage). */
export function cacheAvailable(): boolean;
/** The parts of a split GGUF as one GGUF file for the loader (one unsplit source: itself). */
export function splitSource(parts: ByteSource[]): Promise<ByteSource & { parts?: number }>;
/** Every part's URL when url names a part of a split GGUF, else null. */
export function splitUrls(url: string | URL): string[] | null;
/** Why WebGPU cannot run on this page, or null. */
export function webgpuMissingReason(): string | null;
/** Whether an adapter (GPUAdapterInfo or AdapterSummary-like names) is a software one. */
export function isSoftwareAdapter(info: { isFallbackAdapter?: boolean; vendor?: string; architecture?: string; device?: string; description?: string } | null): boolean;
/** device 'auto''s default softwareAdapterMaxBytes (0: a software adapter takes no model). */
export const SOFTWARE_ADAPTER_MAX_BYTES: number;
/** The engines under Model (web/lw-model.mjs). */
export const GpuModel: any;
export const CpuEngine: any;
