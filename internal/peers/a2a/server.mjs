// An A2A 1.0 agent on @a2a-js/sdk, for the tests of Calf's A2A client:
// node server.mjs PORT. It answers "js says: TEXT" (streamed as a status
// update, then an artifact in two chunks); "wait" waits until cancelled;
// "fail" fails; "ask" asks for input, and answers the next message of the
// task with "thanks for: TEXT". It prints "listening PORT" when ready.
import express from 'express';
import { randomUUID } from 'node:crypto';
import { Role, TaskState } from '@a2a-js/sdk';
import { DefaultRequestHandler, InMemoryTaskStore, AgentEvent } from '@a2a-js/sdk/server';
import { jsonRpcHandler, restHandler, agentCardHandler, UserBuilder } from '@a2a-js/sdk/server/express';

const port = Number(process.argv[2] ?? 0);
const textPart = (value) => ({ content: { $case: 'text', value }, metadata: undefined, filename: '', mediaType: 'text/plain' });
const agentMessage = (taskId, contextId, text) => ({
  messageId: randomUUID(), contextId, taskId, role: Role.ROLE_AGENT, parts: [textPart(text)], metadata: undefined, extensions: [], referenceTaskIds: [],
});
const status = (taskId, contextId, state, text) => AgentEvent.statusUpdate({
  taskId, contextId, status: { state, message: text ? agentMessage(taskId, contextId, text) : undefined, timestamp: new Date().toISOString() }, metadata: undefined,
});
const cancelled = new Set();

const executor = {
  async execute(ctx, bus) {
    const { taskId, contextId } = ctx;
    const text = ctx.userMessage.parts.map((p) => p.content?.value ?? '').join('');
    bus.publish(AgentEvent.task(ctx.task ?? {
      id: taskId, contextId, status: { state: TaskState.TASK_STATE_SUBMITTED, message: undefined, timestamp: new Date().toISOString() },
      artifacts: [], history: [ctx.userMessage], metadata: undefined,
    }));
    bus.publish(status(taskId, contextId, TaskState.TASK_STATE_WORKING, 'thinking'));
    if (ctx.task?.status?.state === TaskState.TASK_STATE_INPUT_REQUIRED) {
      bus.publish(AgentEvent.artifactUpdate({ taskId, contextId, artifact: { artifactId: 'a1', name: 'answer', description: '', parts: [textPart('thanks for: ' + text)], metadata: undefined, extensions: [] }, append: false, lastChunk: true, metadata: undefined }));
      bus.publish(status(taskId, contextId, TaskState.TASK_STATE_COMPLETED));
      bus.finished();
      return;
    }
    if (text.endsWith('wait')) {
      while (!cancelled.has(taskId)) await new Promise((r) => setTimeout(r, 20));
      bus.publish(status(taskId, contextId, TaskState.TASK_STATE_CANCELED, 'cancelled'));
      bus.finished();
      return;
    }
    if (text.endsWith('fail')) {
      bus.publish(status(taskId, contextId, TaskState.TASK_STATE_FAILED, 'it went wrong'));
      bus.finished();
      return;
    }
    if (text.endsWith('ask')) {
      bus.publish(status(taskId, contextId, TaskState.TASK_STATE_INPUT_REQUIRED, 'what is your name?'));
      bus.finished();
      return;
    }
    const answer = 'js says: ' + text;
    const half = Math.ceil(answer.length / 2);
    bus.publish(AgentEvent.artifactUpdate({ taskId, contextId, artifact: { artifactId: 'a1', name: 'answer', description: '', parts: [textPart(answer.slice(0, half))], metadata: undefined, extensions: [] }, append: false, lastChunk: false, metadata: undefined }));
    bus.publish(AgentEvent.artifactUpdate({ taskId, contextId, artifact: { artifactId: 'a1', name: 'answer', description: '', parts: [textPart(answer.slice(half))], metadata: undefined, extensions: [] }, append: true, lastChunk: true, metadata: undefined }));
    bus.publish(status(taskId, contextId, TaskState.TASK_STATE_COMPLETED));
    bus.finished();
  },
  async cancelTask(taskId) {
    cancelled.add(taskId);
  },
};

const app = express();
const server = app.listen(port, '127.0.0.1', () => {
  const base = `http://127.0.0.1:${server.address().port}`;
  const card = {
    name: 'jsagent', description: 'A JavaScript agent that answers politely.', version: '1.0.0',
    supportedInterfaces: [
      { url: `${base}/a2a/jsonrpc`, protocolBinding: 'JSONRPC', protocolVersion: '1.0', tenant: '' },
      { url: `${base}/a2a/rest`, protocolBinding: 'HTTP+JSON', protocolVersion: '1.0', tenant: '' },
    ],
    capabilities: { streaming: true, pushNotifications: false, extensions: [], extendedAgentCard: false },
    defaultInputModes: ['text/plain'], defaultOutputModes: ['text/plain'],
    skills: [{ id: 'answer', name: 'answer', description: 'Answers.', tags: ['demo'], examples: [], inputModes: [], outputModes: [], securityRequirements: [] }],
    securitySchemes: {}, securityRequirements: [], signatures: [], provider: undefined, documentationUrl: undefined, iconUrl: undefined,
  };
  const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), executor);
  app.use('/.well-known/agent-card.json', agentCardHandler({ agentCardProvider: { getAgentCard: async () => card } }));
  app.use('/a2a/jsonrpc', jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
  app.use('/a2a/rest', restHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
  console.log('listening ' + server.address().port);
});
