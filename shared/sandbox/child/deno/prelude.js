// AgentCards TypeScript child: the globals agent code sees, speaking the bridge's frames.
//
// Runs as main.js inside the confined child (shared/sandbox/child/deno_child.py wrote it
// to the private /tmp and started Deno before the run was asked for: a spare). The channel
// to the bridge is this process's stdin (start, replies) and stdout (frames): 4-byte
// big-endian length + one JSON object, the same frames the Python child sends
// (shared/sandbox/messages.py). The agent's code and capabilities are imported as
// `data:application/typescript` modules, which Deno strips of types without any permission.
// Deno runs with every permission denied; this file adds no capability, it only frames
// calls. The bridge validates every frame, so agent code forging one gains nothing.
import { AsyncLocalStorage } from "node:async_hooks";

const MAX_DEPTH = 64; // JSON nesting, as shared/sandbox/child/wire.py
const CAP_DEPTH = 8; // capability nesting, as shared/sandbox/child/inline.py
const STDOUT_FRAME = 64 << 10;
const PROGRESS_CHARS = 1000;
const ERROR_CHARS = 500;
const BODY_HEADER = "export default async function (args: any) {\n"; // one line above the code

// ---- primordials ----------------------------------------------------------------------
// What framing and reply routing use, taken before the agent's code runs, so code that
// patches JSON, Map, the typed arrays, TextEncoder or Object.prototype (a `toJSON`), or
// replaces a global, cannot rewrite another call's frame or send a reply to the wrong call.
// The bridge validates every frame anyway; this keeps the run itself truthful. These
// names shadow the globals in this module only (tests/integration/sandbox/test_typescript.py).
const { Map, Promise, Uint8Array, DataView, TextEncoder, TextDecoder, String, Number } = globalThis;
const stringify = JSON.stringify;
const parse = JSON.parse;
const uncurry = (fn) => Function.prototype.call.bind(fn);
const TypedArray = Object.getPrototypeOf(Uint8Array.prototype);
const getter = (proto, name) => uncurry(Object.getOwnPropertyDescriptor(proto, name).get);
const lengthOf = getter(TypedArray, "length");
const bufferOf = getter(TypedArray, "buffer");
const byteOffsetOf = getter(TypedArray, "byteOffset");
const subarray = uncurry(TypedArray.subarray);
const sliceBytes = uncurry(TypedArray.slice);
const setBytes = uncurry(TypedArray.set);
const setUint32 = uncurry(DataView.prototype.setUint32);
const getUint32 = uncurry(DataView.prototype.getUint32);
const encode = uncurry(TextEncoder.prototype.encode);
const decode = uncurry(TextDecoder.prototype.decode);
const mapGet = uncurry(Map.prototype.get);
const mapSet = uncurry(Map.prototype.set);
const mapDelete = uncurry(Map.prototype.delete);

const stdin = Deno.stdin;
const stdout = Deno.stdout;
const readStdin = stdin.read.bind(stdin);
const writeStdout = stdout.writeSync.bind(stdout);
const exit = Deno.exit;
const inspect = Deno.inspect;
const encoder = new TextEncoder();

// ---- frames -----------------------------------------------------------------------
// The frame itself has no prototype: an inherited `toJSON` cannot replace it.
function send(msg) {
  const body = encode(encoder, stringify({ __proto__: null, ...msg }));
  const size = lengthOf(body);
  const frame = new Uint8Array(4 + size);
  setUint32(new DataView(bufferOf(frame)), 0, size);
  setBytes(frame, body, 4);
  let view = frame;
  while (lengthOf(view)) view = subarray(view, writeStdout(view));
}

const pending = new Map();

// Frames from the bridge, in order: the first is `start`, then `tool_result`s.
class FrameReader {
  constructor() {
    this.buf = new Uint8Array(0);
    this.chunk = new Uint8Array(1 << 16);
    this.decoder = new TextDecoder();
  }

  async next() {
    for (;;) {
      const have = lengthOf(this.buf);
      if (have >= 4) {
        const size = getUint32(new DataView(bufferOf(this.buf), byteOffsetOf(this.buf)), 0);
        if (have >= 4 + size) {
          const body = subarray(this.buf, 4, 4 + size);
          this.buf = sliceBytes(this.buf, 4 + size);
          try {
            return parse(decode(this.decoder, body));
          } catch {
            return null;
          }
        }
      }
      const n = await readStdin(this.chunk);
      if (n === null) return null;
      const joined = new Uint8Array(have + n);
      setBytes(joined, this.buf);
      setBytes(joined, subarray(this.chunk, 0, n), have);
      this.buf = joined;
    }
  }
}

const reader = new FrameReader();
send({ op: "ready" }); // to the launcher, which keeps this child as a spare from now on
const start = await reader.next();
if (start === null || start.op !== "start" || typeof start.code !== "string") exit(0);
const limits = start.limits ?? {};
const STDOUT_BYTES = limits.stdout_bytes ?? 1 << 20;
const RESULT_BYTES = limits.result_bytes ?? 4 << 20;
const TOOL_ARGS_BYTES = limits.tool_args_bytes ?? 1 << 20;
const MAX_TOOL_CALLS = limits.max_tool_calls ?? 1000;

async function readReplies() {
  for (;;) {
    const frame = await reader.next();
    if (frame === null) exit(0); // the bridge went away (or broke the protocol): nothing left to do
    const waiter = mapGet(pending, frame?.id);
    if (frame?.op !== "tool_result" || waiter === undefined) continue;
    mapDelete(pending, frame.id);
    if (frame.ok) {
      waiter.resolve(frame.value);
    } else {
      const err = frame.error ?? {};
      waiter.reject(
        new ToolCallError(
          String(err.type ?? "tool_error"),
          String(err.message ?? "tool call failed"),
          String(frame.tool ?? "?"),
          err.policies ?? null,
          err.url ?? null,
        ),
      );
    }
  }
}

// ---- the agent's modules -------------------------------------------------------------
function dataUrl(source) {
  const bytes = encoder.encode(source);
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return "data:application/typescript;base64," + btoa(binary);
}

const BODY_URL = dataUrl(BODY_HEADER + start.code + "\n}\n");
const capSpecs = start.capabilities && typeof start.capabilities === "object" ? start.capabilities : {};
const CAPS_URL = dataUrl(
  "export default {\n" +
    Object.entries(capSpecs)
      .filter(([, spec]) => typeof spec?.code === "string")
      .map(([name, spec]) => `${JSON.stringify(name)}: async function (args: any) {\n${spec.code}\n},\n`)
      .join("") +
    "};\n",
);

// Deno's parse error: "SyntaxError: <what>\n  |\n2 | <line>\n  |  ~\n    at <url>:<line>:<column>".
function syntaxError(err) {
  const message = String(err?.message ?? err);
  const at = /:(\d+):(\d+)\s*$/.exec(message);
  if (!/SyntaxError/.test(message) || at === null) return null;
  let line = Math.max(1, Number(at[1]) - 1);
  let column = Number(at[2]);
  // Past the code's end (an unclosed `{` met the wrapper's own `}`): the end of the code.
  const lines = start.code.split("\n");
  if (line > lines.length) [line, column] = [lines.length, lines[lines.length - 1].length + 1];
  const quoted = /^\s*\d+\s*\|\s?(.*)$/m.exec(message);
  const what = message.split("\n")[0].replace(/^(TypeError: )?/, "");
  return {
    op: "done",
    ok: false,
    error: {
      type: "syntax_error",
      message: `${what} at line ${line}, column ${column}`.slice(0, 4000),
      details: { line, column, text: (lines[line - 1] ?? quoted?.[1] ?? "").slice(0, 200) },
    },
  };
}

// ---- output capture -----------------------------------------------------------------
let outLeft = STDOUT_BYTES;
let outTruncated = false;
let outPending = [];
let outPendingBytes = 0;

function write(text) {
  if (outLeft <= 0) {
    if (text) outTruncated = true;
    return;
  }
  let bytes = encoder.encode(text);
  if (bytes.length > outLeft) {
    bytes = bytes.subarray(0, outLeft);
    text = new TextDecoder().decode(bytes).replace(/\uFFFD$/, "");
    outTruncated = true;
  }
  outLeft -= bytes.length;
  outPending.push(text);
  outPendingBytes += bytes.length;
  if (outPendingBytes >= STDOUT_FRAME) drain();
}

function drain() {
  flushEvents();
  if (!outPending.length) return;
  const text = outPending.join("");
  outPending = [];
  outPendingBytes = 0;
  for (let i = 0; i < text.length; i += STDOUT_FRAME) {
    send({ op: "stdout", data: text.slice(i, i + STDOUT_FRAME) });
  }
}

function format(values) {
  return values.map((v) => (typeof v === "string" ? v : inspect(v, { depth: 4 }))).join(" ");
}

const line = (...values) => write(format(values) + "\n");
const console = {
  log: line,
  info: line,
  debug: line,
  warn: line,
  error: line,
  trace: line,
  dir: (v) => write(inspect(v) + "\n"),
  table: line,
  assert: (ok, ...values) => {
    if (!ok) line("Assertion failed", ...values);
  },
};
Object.defineProperty(globalThis, "console", { value: console, writable: true, configurable: true });

// ---- errors ---------------------------------------------------------------------------
class ToolCallError extends Error {
  constructor(type, message, tool, policies = null, url = null) {
    super(`${tool}: ${message}`);
    this.name = "ToolCallError";
    this.type = type;
    this.tool = tool;
    this.toolMessage = message;
    // policy_denied: the ids of the policies that decided (empty: none permits it).
    this.policies = policies;
    // authorization_required: the link where the person connects the server.
    this.url = url;
  }
}

class CapabilityError extends Error {
  constructor(type, message) {
    super(message);
    this.name = "CapabilityError";
    this.type = type;
  }
}

class ResultNotJson extends Error {
  constructor(path, kind, problem) {
    super(`${path} ${problem}; a result must be JSON (object, array, string, number, boolean, null)`);
    this.path = path;
    this.kind = kind;
  }
}

// ---- tools and resources --------------------------------------------------------------
let nextId = 0;
let caps = {};
const chain = new AsyncLocalStorage();
const capIds = Object.fromEntries(
  Object.entries(start.capabilities ?? {}).map(([name, spec]) => [name, String(spec?.id ?? name)]),
);

function request(frame) {
  drain();
  return new Promise((resolve, reject) => {
    mapSet(pending, frame.id, { resolve, reject });
    send(frame);
  });
}

function callTool(tool, kwargs) {
  if (nextId >= MAX_TOOL_CALLS) {
    return Promise.reject(new ToolCallError("tool_call_limit", `more than ${MAX_TOOL_CALLS} tool calls`, tool));
  }
  if (kwargs === undefined) kwargs = {};
  if (kwargs === null || typeof kwargs !== "object" || Array.isArray(kwargs)) {
    return Promise.reject(new TypeError(`${tool} takes one object of named arguments`));
  }
  let text;
  try {
    text = stringify(kwargs);
  } catch (err) {
    return Promise.reject(new TypeError(`arguments to ${tool} must be JSON-serialisable: ${err.message}`));
  }
  if (lengthOf(encode(encoder, text)) > TOOL_ARGS_BYTES) {
    return Promise.reject(new ToolCallError("tool_args_too_large", `arguments exceed ${TOOL_ARGS_BYTES} bytes`, tool));
  }
  const calling = chain.getStore() ?? [];
  const parent = calling.length ? capIds[calling[calling.length - 1]] : null;
  nextId += 1;
  return request({ op: "tool_call", id: nextId, tool, parent, args: parse(text) });
}

function readResource(server, uri) {
  const label = `${server}.read_resource`;
  if (typeof uri !== "string") return Promise.reject(new TypeError("read_resource(uri) takes the resource URI as a string"));
  if (nextId >= MAX_TOOL_CALLS) {
    return Promise.reject(new ToolCallError("tool_call_limit", `more than ${MAX_TOOL_CALLS} tool calls`, label));
  }
  nextId += 1;
  return request({ op: "resource_read", id: nextId, server, uri });
}

// `then` is never a server or tool: `await mcp` must not look like a promise.
function serverProxy(server) {
  return new Proxy(Object.create(null), {
    get(_, tool) {
      if (typeof tool !== "string" || tool === "then") return undefined;
      if (tool === "read_resource") {
        return (arg) => (typeof arg === "string" ? readResource(server, arg) : callTool(`${server}:${tool}`, arg));
      }
      return (kwargs) => callTool(`${server}:${tool}`, kwargs);
    },
  });
}

const mcp = new Proxy(Object.create(null), {
  get(_, server) {
    if (typeof server !== "string" || server === "then") return undefined;
    return serverProxy(server);
  },
});

// ---- capabilities ---------------------------------------------------------------------
let events = [];
let seq = 0;

function flushEvents() {
  if (!events.length) return;
  const batch = events;
  events = [];
  send({ op: "capability_events", events: batch });
}

function errorType(err) {
  if (err instanceof ToolCallError || err instanceof CapabilityError) return err.type;
  if (isAllocationFailure(err)) return "memory_limit";
  return "runtime_error";
}

async function runCapability(name, kwargs) {
  const calling = chain.getStore() ?? [];
  const path = [...calling, name].join(" -> ");
  if (calling.includes(name)) throw new CapabilityError("capability_cycle", `capability cycle: ${path}`);
  if (calling.length >= CAP_DEPTH) {
    throw new CapabilityError("capability_depth_exceeded", `capability depth limit of ${CAP_DEPTH} exceeded: ${path}`);
  }
  seq += 1;
  const mine = seq;
  events.push(["s", mine, name, calling.length ? calling[calling.length - 1] : null, Date.now() * 1000]);
  const t0 = performance.now();
  try {
    const value = await chain.run([...calling, name], () => caps[name](kwargs ?? {}));
    events.push(["e", mine, Math.round((performance.now() - t0) * 1000), null]);
    if (events.length >= 256) flushEvents();
    return value;
  } catch (err) {
    const message = describe(err).slice(0, ERROR_CHARS);
    events.push(["e", mine, Math.round((performance.now() - t0) * 1000), { type: errorType(err), message }]);
    throw err;
  }
}

const capabilities = new Proxy(Object.create(null), {
  get(_, name) {
    if (typeof name !== "string" || name === "then") return undefined;
    if (!Object.hasOwn(caps, name)) {
      const available = Object.keys(caps).sort().join(", ") || "none";
      throw new TypeError(`no capability named '${name}' in this execution (available: ${available})`);
    }
    return (kwargs) => runCapability(name, kwargs);
  },
  ownKeys: () => Object.keys(caps),
  getOwnPropertyDescriptor: (_, name) =>
    Object.hasOwn(caps, name) ? { configurable: true, enumerable: true, value: undefined } : undefined,
});

// ---- progress ------------------------------------------------------------------------
function number(name, value) {
  if (value === undefined || value === null) return null;
  if (typeof value !== "number" || !Number.isFinite(value)) {
    throw new TypeError(`progress ${name} must be a finite number or null`);
  }
  return value;
}

function progress(message, done = null, total = null) {
  const frame = { op: "progress", message: String(message).slice(0, PROGRESS_CHARS), done: number("done", done), total: number("total", total) };
  drain();
  send(frame);
}

// ---- result --------------------------------------------------------------------------
function kindOf(value) {
  if (value === undefined) return "undefined";
  if (typeof value === "bigint") return "bigint";
  if (typeof value === "function") return "function";
  if (typeof value === "symbol") return "symbol";
  return value?.constructor?.name ?? "object";
}

const HINTS = {
  Date: "value.toISOString()",
  Map: "Object.fromEntries(value)",
  Set: "[...value]",
  bigint: "value.toString() or Number(value)",
  Uint8Array: "Array.from(value)",
};

function pathOf(keys) {
  const head = keys.slice(0, 12).map((k) => `[${JSON.stringify(k)}]`).join("");
  return "result" + head + (keys.length > 12 ? `...(${keys.length} levels)` : "");
}

function notJson(keys, kind, problem) {
  const hint = HINTS[kind];
  return new ResultNotJson(pathOf(keys), kind, problem + (hint ? ` (use ${hint})` : ""));
}

// Strict, like the Python child's result check: what JSON cannot hold is refused by path,
// never silently dropped or stringified. Undefined object members are left out (JSON's rule).
function checkResult(value) {
  const stack = [[value, []]];
  while (stack.length) {
    const [item, keys] = stack.pop();
    if (keys.length > MAX_DEPTH) throw new ResultNotJson(pathOf(keys), "object", `nests deeper than ${MAX_DEPTH} levels (a cycle?)`);
    if (item === null || typeof item === "string" || typeof item === "boolean") continue;
    if (typeof item === "number") {
      if (!Number.isFinite(item)) throw notJson(keys, "number", `is ${item}, which JSON cannot hold`);
      continue;
    }
    if (Array.isArray(item)) {
      item.forEach((child, i) => {
        if (child === undefined) throw notJson([...keys, i], "undefined", "is undefined");
        stack.push([child, [...keys, i]]);
      });
      continue;
    }
    const proto = typeof item === "object" ? Object.getPrototypeOf(item) : undefined;
    if (proto === Object.prototype || proto === null) {
      for (const [key, child] of Object.entries(item)) {
        if (child !== undefined) stack.push([child, [...keys, key]]);
      }
      continue;
    }
    const kind = kindOf(item);
    const article = /^[aeiou]/i.test(kind) ? "an" : "a";
    throw notJson(keys, kind, `is ${article} ${kind}`);
  }
}

// ---- running the body ----------------------------------------------------------------
function isAllocationFailure(err) {
  return err instanceof RangeError && /allocation failed|Invalid typed array length|Invalid array buffer length/.test(err.message);
}

function describe(err) {
  if (err instanceof Error) return `${err.name}: ${err.message}`;
  try {
    return `Uncaught ${inspect(err, { depth: 2 })}`;
  } catch {
    return "Uncaught exception";
  }
}

// Stack frames of the agent's own code, renumbered to its lines (body.ts has one line above).
// Deno shortens a long data: URL in a stack frame to its head, "......" and its tail.
function unabbreviated(line) {
  return line.replace(/data:application\/typescript;base64,([A-Za-z0-9+/=]*)\.{6}([A-Za-z0-9+/=]*)/g, (whole, head, tail) => {
    for (const url of [BODY_URL, CAPS_URL]) {
      const b64 = url.slice(url.indexOf(",") + 1);
      if (b64.startsWith(head) && b64.endsWith(tail)) return url;
    }
    return whole;
  });
}

function traceback(err) {
  const stack = err instanceof Error && typeof err.stack === "string" ? err.stack : "";
  return stack
    .split("\n")
    .map((line) =>
      unabbreviated(line)
        .split(BODY_URL + ":")
        .join("<code>:")
        .replace(/<code>:(\d+):(\d+)/g, (_, l, c) => `<code>:${Number(l) - 1}:${c}`)
        .split(CAPS_URL + ":")
        .join("<capability>:"),
    )
    .filter((line) => !/file:\/\/[^\s)]*\/main\.js|ext:/.test(line))
    .join("\n")
    .slice(-16000);
}

// As the Python child says for a refused socket (shared/sandbox/child/advice.py NO_NETWORK).
const NO_NETWORK =
  "The sandbox has no network (sockets, DNS and HTTP are refused): reach external systems " +
  "through tools, `await mcp.<server>.<tool>({...})` (find them with search_tools)";

function withHint(message) {
  return /^NotCapable: Requires (net|import) access/.test(message) ? `${message}. ${NO_NETWORK}` : message;
}

function failure(type, message, err, details) {
  const error = { type, message: String(message).slice(0, 4000) };
  const tb = err === undefined ? "" : traceback(err);
  if (tb) error.traceback = tb;
  if (details) error.details = details;
  return { op: "done", ok: false, error };
}

async function execute() {
  let body;
  try {
    caps = (await import(CAPS_URL)).default;
  } catch (err) {
    return failure("runtime_error", `a capability's code does not load: ${describe(err)}`.slice(0, 4000));
  }
  try {
    body = (await import(BODY_URL)).default;
  } catch (err) {
    return syntaxError(err) ?? failure("runtime_error", describe(err), err);
  }
  let value;
  try {
    value = await body(wrapArgs(start.args ?? {}));
  } catch (err) {
    if (err instanceof ToolCallError) return failure(err.type, err.message, err);
    if (err instanceof CapabilityError) return failure(err.type, err.message, err);
    if (isAllocationFailure(err)) {
      return failure("memory_limit", `${describe(err)}: the run is out of its memory limit; process data in smaller pieces`, err);
    }
    return failure("runtime_error", withHint(describe(err)), err);
  }
  if (value === undefined) value = null;
  try {
    checkResult(value);
  } catch (err) {
    if (err instanceof ResultNotJson) return failure("result_not_json", err.message, undefined, { path: err.path, type: err.kind });
    throw err;
  }
  const text = stringify(value);
  if (lengthOf(encode(encoder, text)) > RESULT_BYTES) {
    return failure("output_limit", `the result is larger than ${RESULT_BYTES} bytes; return less (a summary, or the first items)`);
  }
  return { op: "done", ok: true, result: value };
}

function wrapArgs(value) {
  return value && typeof value === "object" ? value : {};
}

// Unawaited rejections are the agent's to handle; they must not end the run without done.
globalThis.addEventListener("unhandledrejection", (event) => event.preventDefault());
Object.assign(globalThis, { mcp, capabilities, progress, ToolCallError });
void readReplies();
const done = await execute();
drain();
done.stdout_truncated = outTruncated;
send(done);
exit(0);
