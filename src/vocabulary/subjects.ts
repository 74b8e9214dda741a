// The names protocol.md composes from a node's name (bus users, subjects, inboxes, streams, consumers), said
// once for both halves: the operator's (src/mesh/) and the host's link.

export const CONTROLLER_USER = "mesh";
export const STREAM_SUBJECTS = {
  ENROL: "mesh.enrol.>",
  DECLARE: "mesh.declare.>",
  REPORTS: "mesh.report.>",
  REKEY: "mesh.rekey.>",
} as const;
export type StreamName = keyof typeof STREAM_SUBJECTS;
export const ENROL_CONSUMER = "mesh-enrol";
export const REPORTS_CONSUMER = "mesh-reports";

export const nodeUser = (node: string): string => `node.${node}`;
export const enrolUser = (node: string): string => `enrol.${node}`;
export const nodeConsumer = (node: string): string => `node-${node}`;
export const declareSubject = (node: string): string => `mesh.declare.${node}`;
/** The direct get of the last declaration on a node's subject (the subject in the API subject, no payload). */
export const DECLARE_DIRECT_GET = "$JS.API.DIRECT.GET.DECLARE";
export const declareDirectGet = (node: string): string => `${DECLARE_DIRECT_GET}.${declareSubject(node)}`;
export const reportSubject = (node: string): string => `mesh.report.${node}`;
export const heartbeatSubject = (node: string): string => `mesh.heartbeat.${node}`;
export const enrolSubject = (node: string): string => `mesh.enrol.${node}`;
export const rekeySubject = (node: string): string => `mesh.rekey.${node}`;
export const nodeInboxPrefix = (node: string): string => `_INBOX.node.${node}`;
export const enrolInboxPrefix = (node: string): string => `_INBOX.enrol.${node}`;
