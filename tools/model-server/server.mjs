// A small OpenAI-compatible server around node-llama-cpp, for dlq-bridge's
// real-model tests and bench/bench_quality.py. Never shipped, never exposed:
// it listens on 127.0.0.1 only.
//
//   node server.mjs --model ~/.cache/dlq-bridge/models/qwen15.gguf --port 0
//
// Prints one line `listening <port>` on stdout once the model is loaded.
// Endpoints: GET /v1/models, POST /v1/chat/completions (stream false or true).
// `response_format` is honoured: json_schema -> a grammar from the schema (one
// line: no newlines or indentation between members), json_object -> the JSON
// grammar, absent or text -> free text. `frequency_penalty` and
// `presence_penalty` are OpenAI's (off unless sent). One call runs
// at a time (a CPU model serves one sequence); the others wait in order. The
// evaluated prefix is kept between calls, so a repeated system prompt is not
// evaluated again.
//
// Options (or env): --model (MODEL_PATH), --port (PORT, 0 = any free),
// --threads (MODEL_THREADS, 2), --context (MODEL_CONTEXT, 8192),
// --max-tokens (MODEL_MAX_TOKENS, 512), --log (MODEL_SERVER_LOG: a JSON line per call, with its
// seconds, first_token_seconds (the prompt's evaluation), grammar_seconds (building the grammar) and
// usage).
import http from "node:http";
import fs from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";
import { pathToFileURL, fileURLToPath } from "node:url";
import { getLlama, LlamaChatSession } from "node-llama-cpp";

// node-llama-cpp's JSON-schema grammar generator, reached by its file (the package exports only its
// index): `createGrammarForJsonSchema` always allows a newline and indentation between members,
// which a small model takes, at a token or two a line.
const nodeLlamaDist = path.dirname(fileURLToPath(import.meta.resolve("node-llama-cpp")));
const { getGbnfGrammarForGbnfJsonSchema } = await import(
  pathToFileURL(path.join(nodeLlamaDist, "utils", "gbnfJson", "getGbnfGrammarForGbnfJsonSchema.js")).href);

const { values: args } = parseArgs({
  options: {
    model: { type: "string", default: process.env.MODEL_PATH },
    port: { type: "string", default: process.env.PORT ?? "0" },
    threads: { type: "string", default: process.env.MODEL_THREADS ?? "2" },
    context: { type: "string", default: process.env.MODEL_CONTEXT ?? "8192" },
    "max-tokens": { type: "string", default: process.env.MODEL_MAX_TOKENS ?? "512" },
    log: { type: "string", default: process.env.MODEL_SERVER_LOG },
  },
});
if (!args.model) {
  console.error("model-server: --model PATH (or MODEL_PATH) is required");
  process.exit(2);
}
const modelId = path.basename(args.model).replace(/\.gguf$/, "");
const maxTokensCap = Number(args["max-tokens"]);

const llama = await getLlama({ gpu: false, build: "never", logLevel: "error" });
const model = await llama.loadModel({ modelPath: args.model });
const context = await model.createContext({
  contextSize: Number(args.context),
  threads: Number(args.threads),
  sequences: 1,
});
const sequence = context.getSequence();
const jsonGrammar = await llama.getGrammarFor("json");

let queue = Promise.resolve();
function oneAtATime(task) {
  const run = queue.then(task, task);
  queue = run.catch(() => undefined);
  return run;
}

function textOf(content) {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content.map((part) => (typeof part === "string" ? part : part?.text ?? "")).join("");
  }
  return content == null ? "" : String(content);
}

// OpenAI messages -> node-llama-cpp chat history and the last user prompt.
function toHistory(messages) {
  const history = [];
  let system = "";
  for (const m of messages) {
    const text = textOf(m.content);
    if (m.role === "system" || m.role === "developer") system += (system ? "\n\n" : "") + text;
    else if (m.role === "assistant") history.push({ type: "model", response: [text] });
    else history.push({ type: "user", text });
  }
  let prompt = "";
  if (history.length && history[history.length - 1].type === "user") prompt = history.pop().text;
  return { system, history, prompt };
}

// One JSON object on one line: a space at most between tokens of the structure, no newlines
// (OpenAI's structured outputs are compact too). Kept per schema: the bridge sends the same one.
const compactGrammars = new Map();
function compactGrammarFor(schema) {
  const key = JSON.stringify(schema);
  if (!compactGrammars.has(key)) {
    const grammar = getGbnfGrammarForGbnfJsonSchema(schema, { allowNewLines: false });
    compactGrammars.set(key, llama.createGrammar({ grammar, stopGenerationTriggers: ["\n\n\n\n"], trimWhitespaceSuffix: true }));
  }
  return compactGrammars.get(key);
}

async function grammarFor(format) {
  if (!format || typeof format !== "object") return undefined;
  if (format.type === "json_object") return jsonGrammar;
  if (format.type === "json_schema") {
    const schema = format.json_schema?.schema ?? format.schema;
    return schema ? compactGrammarFor(schema) : jsonGrammar;
  }
  return undefined;
}

// OpenAI's penalties are additive and off unless asked for; node-llama-cpp's default is a
// multiplicative penalty of 1.1 over the last 64 tokens (on every sampled token, and it pushes a JSON
// reply's repeated keys, quotes and brackets off the greedy pick).
function repeatPenaltyOf(body) {
  const frequencyPenalty = Number(body.frequency_penalty ?? 0);
  const presencePenalty = Number(body.presence_penalty ?? 0);
  if (!frequencyPenalty && !presencePenalty) return false;
  return { penalty: 1, frequencyPenalty, presencePenalty, lastTokens: 64 };
}

async function complete(body, onChunk) {
  const called = Date.now();
  const { system, history, prompt } = toHistory(body.messages ?? []);
  const grammar = await grammarFor(body.response_format);
  const grammarSeconds = (Date.now() - called) / 1000;
  const session = new LlamaChatSession({ contextSequence: sequence, systemPrompt: system, autoDisposeSequence: false });
  try {
    session.setChatHistory([{ type: "system", text: system }, ...history]);
    const maxTokens = Math.min(Number(body.max_tokens ?? body.max_completion_tokens ?? maxTokensCap), maxTokensCap);
    const started = Date.now();
    let firstToken = null; // prompt evaluation ends where the first token comes out
    const text = await session.prompt(prompt, {
      grammar,
      temperature: Number(body.temperature ?? 0),
      repeatPenalty: repeatPenaltyOf(body),
      maxTokens,
      onTextChunk: (chunk) => {
        firstToken ??= Date.now();
        onChunk?.(chunk);
      },
    });
    const promptChars = system.length + prompt.length + history.reduce((n, h) => n + (h.text ?? h.response?.join("") ?? "").length, 0);
    const usage = {
      prompt_tokens: model.tokenize(system).length + model.tokenize(prompt).length,
      completion_tokens: model.tokenize(text).length,
    };
    usage.total_tokens = usage.prompt_tokens + usage.completion_tokens;
    if (args.log) {
      const line = { at: new Date().toISOString(), seconds: (Date.now() - started) / 1000,
        first_token_seconds: ((firstToken ?? Date.now()) - started) / 1000, grammar_seconds: grammarSeconds,
        call_seconds: (Date.now() - called) / 1000,
        system_chars: system.length,
        prompt_chars: promptChars, usage, response_format: body.response_format?.type ?? null, stream: !!body.stream,
        messages: (body.messages ?? []).length, tools: (body.tools ?? []).length };
      fs.appendFileSync(args.log, JSON.stringify(line) + "\n");
    }
    return { text, usage };
  } finally {
    session.dispose({ disposeSequence: false });
  }
}

function send(res, status, value) {
  const data = JSON.stringify(value);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(data) });
  res.end(data);
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}

async function chat(req, res) {
  let body;
  try {
    body = JSON.parse(await readBody(req));
  } catch {
    return send(res, 400, { error: { message: "body is not JSON", type: "invalid_request_error" } });
  }
  const id = `chatcmpl-${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`;
  const created = Math.floor(Date.now() / 1000);
  const chunk = (delta, finish) => ({ id, object: "chat.completion.chunk", created, model: modelId,
    choices: [{ index: 0, delta, finish_reason: finish }] });
  if (!body.stream) {
    const { text, usage } = await oneAtATime(() => complete(body));
    return send(res, 200, { id, object: "chat.completion", created, model: modelId, usage,
      choices: [{ index: 0, message: { role: "assistant", content: text }, finish_reason: "stop" }] });
  }
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
  const write = (value) => res.write(`data: ${JSON.stringify(value)}\n\n`);
  write(chunk({ role: "assistant", content: "" }, null));
  const { usage } = await oneAtATime(() => complete(body, (text) => write(chunk({ content: text }, null))));
  write(chunk({}, "stop"));
  if (body.stream_options?.include_usage) write({ id, object: "chat.completion.chunk", created, model: modelId, choices: [], usage });
  res.end("data: [DONE]\n\n");
}

const server = http.createServer(async (req, res) => {
  try {
    const url = new URL(req.url, "http://localhost");
    if (req.method === "GET" && url.pathname === "/v1/models") {
      return send(res, 200, { object: "list", data: [{ id: modelId, object: "model", owned_by: "dlq-bridge-tests" }] });
    }
    if (req.method === "POST" && url.pathname === "/v1/chat/completions") return await chat(req, res);
    return send(res, 404, { error: { message: "not found", type: "invalid_request_error" } });
  } catch (err) {
    console.error("model-server:", err);
    if (!res.headersSent) send(res, 500, { error: { message: "model error", type: "server_error" } });
    else res.end();
  }
});
server.requestTimeout = 0;
server.headersTimeout = 0;
server.listen(Number(args.port), "127.0.0.1", () => {
  process.stdout.write(`listening ${server.address().port}\n`);
});
for (const signal of ["SIGTERM", "SIGINT"]) process.on(signal, () => process.exit(0));
