// The operator's half (`mesh-host mesh …`): the bus's configuration and its servers, enrolment codes, the
// controller's half of the protocol (answering enrolments with a sealed membership, signing with each node's
// serial, sealing secrets, pushing, the fleet view, the sealed move, the releases in the object store). It knows the vocabulary (with the
// envelope and the sealing) and the nats client, nothing of the host's layers; none of them imports it, and the
// Android build leaves it out. Only src/cli/mesh/ and the tests import this surface.

export {
  type AccountKeys,
  accountId,
  accountJwt,
  enrolUserJwt,
  makeAccountKeys,
  NODE_SERVICES,
  nodesAccountJwt,
  nodeUserJwt,
  operatorJwt,
  serviceUserJwt,
  userOfIdentity,
} from "./accounts.ts";
export { type Bus, BusDown, connectBus, ensureStreams, jsCall } from "./bus.ts";
export {
  accountIdOf,
  type Revoke,
  type Revoking,
  revocationsOnBus,
  revokeUsers,
  serviceAuthenticator,
} from "./claims.ts";
export { authLines, serverConf } from "./conf.ts";
export { answerable, consumeLoop, membershipOf, refusedAnswer, reply, sealedAnswer } from "./controller.ts";
export { writeAtomic } from "./files.ts";
export { age, type FleetRow, fleetRows, fleetTable } from "./fleet.ts";
export { type HeardFrom, heardFrom, identityOf } from "./heard.ts";
export { type InitOptions, initMesh, selfSigned } from "./init.ts";
export {
  type Job,
  JobLog,
  type JobNode,
  jobsBucket,
  listJobs,
  newJob,
  newJobId,
  outcomeCounts,
  saveJob,
  startJob,
} from "./jobs.ts";
export { Bucket, Conflict, type Entry } from "./kv.ts";
export { FACT_KEYS, fieldsOf, labelNode, matchingNodes, parseLabels, selectedNodes } from "./labels.ts";
export { type MeshConfig, MeshDir, MeshRefused } from "./layout.ts";
export { migrate } from "./migrate.ts";
export { markMoved, prepareMove } from "./move.ts";
export { addNode, checkNodeName, codeOf, reissueNode, removeNode, revokesOf } from "./nodes.ts";
export { enrolPermissions, nodePermissions, type Permissions, type Reads } from "./permissions.ts";
export { askPlans, composePlans, type PlanAsked, type PlanHeard } from "./plan.ts";
export {
  type Composed,
  exitOf,
  type Pushed,
  type PushInput,
  preparePush,
  publishAndWait,
  replacedLine,
  targetsOf,
  unrecordedLine,
} from "./push.ts";
export {
  addRelease,
  listReleases,
  type ReleaseInput,
  type ReleaseRow,
  removeRelease,
  storeRelease,
} from "./release.ts";
export { reportOf } from "./reports.ts";
export { issuedAfter } from "./revocations.ts";
export { checkRollout, checkUpgrade, progressOf, runRollout, wavesOf } from "./rollout.ts";
export { natsServerPath, runningServers } from "./servers.ts";
export {
  type NodesAccount,
  nodesAccountFor,
  nodesAccountId,
  nodesAccountPair,
  SHARDS,
  shardOf,
} from "./shards.ts";
export {
  allNodes,
  BUCKETS,
  type CodeRecord,
  type FleetEntry,
  fleetOf,
  knownNode,
  type NodeRecord,
  openState,
  type State,
  stateOf,
  withState,
} from "./state.ts";
export { writeUnits } from "./units.ts";
export { type UpOptions, up } from "./up.ts";
export { publishDeclaration } from "./wake.ts";
export { type Heard, watch } from "./watch.ts";
