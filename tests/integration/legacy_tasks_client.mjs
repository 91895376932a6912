// The official TypeScript SDK's experimental tasks client (2025-11-25) against a gateway
// endpoint: prints a JSON transcript of each step for tests/integration/e2e/test_mcp_tasks.py.
// argv: the SDK's dist/esm folder, the endpoint URL, the request headers (JSON), the steps
// (JSON: [{name, tool, arguments, as?: "stream" | "create" | "plain"}]).
import { pathToFileURL } from "node:url";

const [sdk, url, headersJson, stepsJson] = process.argv.slice(2);
const load = (path) => import(pathToFileURL(`${sdk}/${path}`).href);
const { Client } = await load("client/index.js");
const { StreamableHTTPClientTransport } = await load("client/streamableHttp.js");
const { ElicitRequestSchema, CallToolResultSchema, TaskStatusNotificationSchema } = await load(
  "types.js",
);

function connect() {
  const client = new Client(
    { name: "legacy-tasks-test", version: "1" },
    { capabilities: { elicitation: { form: {} } } },
  );
  const asked = [];
  const notified = [];
  client.setNotificationHandler(TaskStatusNotificationSchema, (notification) => {
    notified.push([notification.params.taskId, notification.params.status]);
  });
  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    asked.push({
      message: request.params.message,
      related: request.params._meta?.["io.modelcontextprotocol/related-task"] ?? null,
    });
    return { action: "accept", content: { username: "ada", email: "ada@example.com" } };
  });
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: JSON.parse(headersJson) },
  });
  return { client, transport, asked, notified };
}

const code = (error) => (error && typeof error.code === "number" ? error.code : String(error));
const out = { steps: {} };
const first = connect();
await first.client.connect(first.transport);
out.protocolVersion = first.transport.protocolVersion ?? null;
out.tasksCapability = first.client.getServerCapabilities()?.tasks ?? null;
const listed = await first.client.listTools();
out.taskSupport = Object.fromEntries(
  listed.tools.map((tool) => [tool.name, tool.execution?.taskSupport ?? null]),
);
const tasks = first.client.experimental.tasks;
for (const step of JSON.parse(stepsJson)) {
  const record = { messages: [] };
  out.steps[step.name] = record;
  const params = { name: step.tool, arguments: step.arguments ?? {} };
  try {
    if (step.as === "plain") {
      record.result = await first.client.request(
        { method: "tools/call", params: { ...params, task: { ttl: 60000 } } },
        CallToolResultSchema,
      );
      continue;
    }
    const stream = tasks.callToolStream(params, CallToolResultSchema, {
      task: { ttl: step.ttl ?? 60000 },
    });
    for await (const message of stream) {
      if (message.type === "taskCreated" || message.type === "taskStatus") {
        record.messages.push({ type: message.type, ...message.task });
        record.taskId = message.task.taskId;
        if (step.as === "create") break;
      } else if (message.type === "result") {
        record.messages.push({ type: "result" });
        record.result = message.result;
      } else {
        record.messages.push({ type: "error", code: code(message.error), message: String(message.error?.message) });
      }
    }
    if (step.as === "create") {
      record.cancel = await tasks.cancelTask(record.taskId);
      record.afterCancel = await tasks.getTask(record.taskId);
      try {
        await tasks.cancelTask(record.taskId);
      } catch (error) {
        record.cancelAgain = code(error);
      }
    } else if (record.messages.some((m) => m.type === "error") && record.taskId) {
      record.taskResult = await tasks.getTaskResult(record.taskId, CallToolResultSchema).catch(
        (error) => ({ error: code(error), message: String(error.message) }),
      );
    }
  } catch (error) {
    record.error = code(error);
    record.message = String(error?.message ?? error);
  }
}
out.asked = first.asked;
out.notified = first.notified;
out.listed = (await tasks.listTasks()).tasks.map((task) => [task.taskId, task.status]);
try {
  await tasks.getTask("no-such-task");
} catch (error) {
  out.unknown = code(error);
}
await first.client.close();
// A second session (a new connection, perhaps another replica) reads the same tasks.
const second = connect();
await second.client.connect(second.transport);
out.fromAnotherSession = {};
for (const [name, step] of Object.entries(out.steps)) {
  if (!step.taskId) continue;
  const task = await second.client.experimental.tasks.getTask(step.taskId);
  out.fromAnotherSession[name] = task.status;
}
await second.client.close();
console.log(JSON.stringify(out));
