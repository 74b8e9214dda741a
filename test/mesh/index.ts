// The mesh double's surface: tests and the demo import only this.
export { fingerprintOfPem, type MadeCert, makeCert } from "./cert.ts";
export {
  type EnrolPolicy,
  EVENT_WAIT_MS,
  MeshDouble,
  type Received,
  type SeenEnrolment,
  STREAMS,
  waitFor,
  waitForAsync,
} from "./double.ts";
export {
  freePort,
  NATS_SERVER,
  NatsServer,
  type Permissions,
  permissionsFor,
  type ServerUser,
} from "./server.ts";
