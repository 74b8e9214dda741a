// Every timeout, interval, limit and default path the host uses, named once (nats.js style).

/**
 * The version a checkout says (package.json's): read only by src/build-info.ts, whose BUILD every report,
 * heartbeat and `version` says; a build stamps package.json's in its place.
 */
export const VERSION = "0.1.0";

export const DEFAULT_STATE_DIR = "/var/lib/mesh-host";
export const DEFAULT_ANDROID_STATE_DIR = "/data/mesh-host";
export const DEFAULT_ROOT = "/";

/** Largest declaration body accepted, checked before parsing so a huge body costs nothing. */
export const MAX_BODY_BYTES = 16 * 1024 * 1024;
/** A secret the installer gives genesis in a file: a password or a key, never a payload. */
export const MAX_INSTALLER_SECRET_BYTES = 64 * 1024;
/** JSON nested deeper than this is refused before JSON.parse can blow the stack. */
export const MAX_JSON_DEPTH = 64;
export const DEFAULT_FILE_MODE = 0o644;
export const DEFAULT_DIR_MODE = 0o755;
export const STATE_DIR_MODE = 0o700;
export const SECRET_FILE_MODE = 0o600;
/** Every file of the state directory: the node's own, read by root alone (reports and kept originals may quote secrets). */
export const STATE_FILE_MODE = 0o600;
/** A process's bundle file that declares no mode: readable, not executable (a script names its interpreter). */
export const BUNDLE_FILE_MODE = 0o644;
/** Lines of one file's diff `--diff` shows before it says how many more there are. */
export const MAX_DIFF_LINES = 200;
/** A file larger than this is not read to be diffed: the plan says so instead. */
export const MAX_DIFF_BYTES = 1024 * 1024;
/** How many file writes may be in flight at once: overlaps fsyncs on Node's thread pool. */
export const FILE_WRITE_CONCURRENCY = 32;
/** How many files are read and hashed at once during a plan. */
export const FILE_READ_CONCURRENCY = 64;
export const ACTION_DEFAULT_TIMEOUT_S = 300;
/** The most an action may declare (`timeout_s`); the unit's TimeoutStopSec is above it, so a stop never cuts one short. */
export const ACTION_MAX_TIMEOUT_S = 86_400;
/** Bytes of an action's output kept for the report. */
export const ACTION_OUTPUT_TAIL_BYTES = 2048;

/** How long a command waits for the state lock before giving up. */
export const LOCK_WAIT_MS = 10 * 60 * 1000;
export const LOCK_POLL_MS = 50;
/** A lock being written this instant reads empty: its writer is given this long before the lock counts as dead. */
export const EMPTY_LOCK_GRACE_MS = 5_000;

export const HEARTBEAT_S = 30;
export const DRIFT_S = 300;
export const MOVE_GRACE_S = 600;
/**
 * The first redial after a lost link waits a uniformly random time up to this long (each later one up to twice the
 * last): a restarted bus must not see its whole fleet in one second (issue 20: no second holds more than a fifth).
 * Uniform over 10 s, 100 nodes come back about ten a second. `run --redial-spread-s` sets it.
 */
export const REDIAL_SPREAD_S = 10;
/** ...and never sooner than this after a failure: no hot loop against a bus that refuses at once. */
export const RECONNECT_FLOOR_MS = 500;
export const RECONNECT_MAX_MS = 60_000;
export const ENROL_TIMEOUT_MS = 30_000;
/**
 * How long an enrolment question goes on being asked while the bus does not acknowledge it (each try waits
 * SERVER_ACK_TIMEOUT_MS) or says no stream keeps it: a cluster electing its ENROL stream's leader, or under load,
 * answers a moment later, a bus with no ENROL stream never; said well within ENROL_TIMEOUT_MS either way.
 */
export const ENROL_ACK_PATIENCE_MS = 10_000;
/** In-progress acks keep a running apply's message alive more often than the consumer's ack wait. */
export const WORKING_ACK_INTERVAL_MS = 5_000;

/** Temporary files carry this marker so a later start can sweep what a crash left. */
export const TEMP_MARKER = ".mesh-tmp-";

/** Every file of the state directory carries this format; a newer one is refused. */
export const STATE_FORMAT = 1;

/**
 * A declaration message carries its body as an escaped JSON string, and an encoder may escape any byte as
 * \u00XX (Go's escapes <, > and &): six bytes a byte. The body's own limit applies again once it is decoded.
 */
export const MAX_ENVELOPE_BYTES = 6 * MAX_BODY_BYTES + 1024;
/** An outbox entry larger than this is no report the host made: it is set aside unread. */
export const MAX_OUTBOX_ENTRY_BYTES = 64 * 1024 * 1024;
/** An enrolment code is a few hundred characters; anything far longer is not one. */
export const MAX_CODE_CHARS = 16 * 1024;

/** How often the run loop looks whether the installed binary was replaced. */
export const UPGRADE_CHECK_MS = 2_000;
/** A replaced binary must stand still this long before the host restarts onto it. */
export const UPGRADE_SETTLE_MS = 1_500;

/** A binary is hashed this much at a time, never read whole. */
export const HASH_CHUNK_BYTES = 1024 * 1024;

/** Files at most this large are read synchronously (cheaper than the thread pool's round trips). */
export const SYNC_READ_MAX_BYTES = 64 * 1024;
/** An apply at a terminal shows a progress line once it has taken this long: by then a person wonders. */
export const PROGRESS_AFTER_MS = 1_000;
/** ...and redraws it at most this often: a line a step for 10,000 steps would cost more than the steps. */
export const PROGRESS_EVERY_MS = 100;

/**
 * Directory handles one apply's decisions keep (src/system/walk.ts); past this many they are all closed and
 * walked again as needed, so a declaration naming thousands of directories never runs out of descriptors.
 */
export const KEPT_DIR_HANDLES_MAX = 256;

/**
 * Where a unit file is verified before it replaces a working one: a scratch directory under the root, on the
 * root's own filesystem (a container's /tmp and /run are mounts of their own, which the root path would miss).
 */
export const UNIT_VERIFY_DIR = "/var/tmp";
/** `systemd-analyze verify` loads one unit and what it names: seconds at most, even on a busy machine. */
export const UNIT_VERIFY_TIMEOUT_MS = 60_000;
/** `systemd-analyze calendar` parses one expression: it answers at once, given room on a busy machine. */
export const CALENDAR_CHECK_TIMEOUT_MS = 10_000;

/** A unit file and the package's files a shell or the init reads: the owner writes, everyone reads. */
export const UNIT_FILE_MODE = 0o644;
/** The installed binary and the rollback launcher. */
export const EXECUTABLE_MODE = 0o755;
/** A directory `install-service` makes for the package's files (/usr/bin, /etc/systemd/system). */
export const PACKAGE_DIR_MODE = 0o755;

// The drivers' timeouts (src/system/): each a command that answers in seconds, given room on a busy machine.
/** One `systemctl` call. */
export const SYSTEMCTL_TIMEOUT_MS = 90_000;
/** A pacman query: the local database and the sync lists only. */
export const PACMAN_QUERY_TIMEOUT_MS = 60_000;
/** A download and install of a large package on a slow mirror. */
export const PACMAN_CHANGE_TIMEOUT_MS = 30 * 60_000;
/** How long one runtime call may take before it is a failure (a pull or load has its own). */
export const RUNTIME_CALL_TIMEOUT_MS = 60_000;
export const RUNTIME_PULL_TIMEOUT_MS = 15 * 60_000;
/** Seconds a container is given to stop on SIGTERM before it is killed. */
export const CONTAINER_STOP_TIMEOUT_S = 10;
/** How long a stop may take before it is given up: the runtime's own timeout and a minute for its daemon. */
export const CONTAINER_STOP_WAIT_MS = (CONTAINER_STOP_TIMEOUT_S + 60) * 1000;
/** One `wg`, `wg-quick`, `ip` or look under /sys for the overlay. */
export const WG_TIMEOUT_MS = 30_000;
/** How long an interface is given to go after its unit stopped, or to come back after it started again. */
export const INTERFACE_SETTLE_MS = 3_000;
/** An interface raised by hand is looked at again after this before it is refused (overlay.md). */
export const LOOK_AGAIN_MS = 1_500;
/** How often an interface is looked at while one waits for it to come or go. */
export const INTERFACE_POLL_MS = 100;
/** `getprop` is asked only when one is on PATH (src/host-kind.ts), and never for longer than this. */
export const GETPROP_TIMEOUT_MS = 1_000;

// The operator's half (`mesh-host mesh …`, src/mesh/): its directory, its servers and its waits.
export const DEFAULT_MESH_DIR = "/var/lib/mesh-host-mesh";
export const MESH_DIR_MODE = 0o700;
export const MESH_FILE_MODE = 0o600;
/**
 * 3: enrolling users in their own account, ENROL; 2: they were NODES' users (`mesh migrate` makes ENROL); 1: the
 * nodes, codes and fleet view were files, which `mesh migrate` moves onto the bus (KV).
 */
export const MESH_FORMAT = 3;
/** A node's record in the mesh-nodes bucket: unchanged since format 2 (format 3 changed only the accounts). */
export const NODE_RECORD_FORMAT = 2;
export const MESH_FORMAT_NODES_ENROL = 2;
export const MESH_FORMAT_FILES = 1;
/** `mesh init` with no `--server`: one server on this machine, the next ones on the ports after it. */
export const DEFAULT_MESH_HOST = "127.0.0.1";
export const DEFAULT_MESH_PORT = 4222;
/** Each server listens for its cluster's routes on the port after its own (documented in the README). */
export const ROUTE_PORT_OFFSET = 1;
/** `--servers N` with no `--server`: server i listens on DEFAULT_MESH_PORT + (i-1) * this. */
export const SERVER_PORT_STEP = 10;
export const MAX_SERVERS = 7;
export const CERT_DAYS = 3650;
/** How long a server has to say it is ready in its log. */
export const SERVER_START_MS = 30_000;
export const SERVER_STOP_MS = 10_000;
/** How often a server's log is read again while one waits for its word. */
export const SERVER_LOG_POLL_MS = 25;
/** JetStream answers once the servers agree on a leader: a cluster coming up takes a few seconds. */
export const JETSTREAM_READY_MS = 60_000;
export const MESH_CONNECT_TIMEOUT_MS = 5_000;
/**
 * An operator's or controller's connection lost mid-command tries again this often, without end while it is
 * asked to reconnect at all (the servers restarting under `mesh up`).
 */
export const MESH_RECONNECT_WAIT_MS = 250;
export const MESH_RECONNECT_ATTEMPTS = -1;
/** How often a server pings its clients to find a dead connection (nats-server's `ping_interval`). */
export const SERVER_PING_INTERVAL_S = 20;
/** How long a TLS handshake with a server (a client's or a route's) may take (nats-server's tls `timeout`). */
export const SERVER_TLS_TIMEOUT_S = 2;
/** JetStream's bounds on a server: memory for in-memory streams (none of the mesh's), disk for the rest. */
export const SERVER_JETSTREAM_MEMORY = "64MB";
export const SERVER_JETSTREAM_DISK = "1GB";
/**
 * How long a server's account resolver looks for an account it does not hold (every one of the mesh's is
 * preloaded): shorter than MESH_CONNECT_TIMEOUT_MS, so a user of another mesh's account is refused in words
 * rather than left to time out.
 */
export const RESOLVER_FETCH_S = 2;
/**
 * The issued-at of NODES' and ENROL's claims as each server's configuration preloads them: older than any claims
 * ever pushed. A server keeps the newest claims it holds (its resolver directory, its peers'), so a preload issued
 * at start would replace, on a restart, the revocations pushed since; this one only fills an empty directory.
 */
export const RESOLVER_PRELOAD_IAT_S = 1;
/** How long a JetStream call is tried again while the servers reload a user list. */
export const JS_RELOAD_MS = 15_000;
/** A JetStream call that met a reload, or a cluster not yet ready, is tried again after this. */
export const JS_RETRY_MS = 100;
/** How long a new consumer's leader election is waited for before its node is told of it (a cluster's). */
export const CONSUMER_LEADER_MS = 30_000;
/** The controller's credentials refused (a cluster reloading its user list): tried this often, this far apart. */
export const CONTROLLER_AUTH_TRIES = 5;
export const CONTROLLER_AUTH_RETRY_MS = 500;
export const JETSTREAM_READY_POLL_MS = 250;
/**
 * How long a message of ENROL or REPORTS handed to one controller waits for its ack before another controller
 * is handed it (a controller that died with its machine never acks); answering one takes well under this.
 */
export const SHARED_ACK_WAIT_MS = 5_000;
/**
 * A controller's pull on a shared durable lasts this long before it asks again: the server keeps a pull of a
 * controller that died until it expires, and hands it messages meanwhile (each then waits SHARED_ACK_WAIT_MS).
 */
export const SHARED_PULL_EXPIRES_MS = 5_000;
/** How many messages a controller's pull on a shared durable asks for at once. */
export const SHARED_PULL_BATCH = 100;
/** A consume loop whose consumer failed starts again after this. */
export const CONSUME_RETRY_MS = 250;
// The bus's accounts and their bounds (protocol.md "Accounts" and "Limits" say why each is what it is).
/** How long a node's pull may stay answered across the accounts: longer than a pull's life (PULL_EXPIRES_MS). */
export const PULL_RESPONSE_THRESHOLD_MS = 6 * 60_000;
/** Node accounts NODES.00 … NODES.7f: a node's revocation walks its shard's clients, not the fleet's. */
export const NODE_SHARDS = 128;
/** `NODES` and each shard: connections (one per node), subscriptions, one message's bytes. */
export const NODES_MAX_CONNECTIONS = 20_000;
export const NODES_MAX_SUBS = 200_000;
export const NODES_MAX_PAYLOAD = 1024 * 1024;
/** One node's user: its inbox's subscriptions (a pull, a request, the plan subject), one message's bytes. */
export const NODE_MAX_SUBS = 16;
export const NODE_MAX_PAYLOAD = 1024 * 1024;
/** An enrolling user: one inbox, one question; `ENROL`: as many enrolling at once as NODES admits nodes. */
export const ENROL_MAX_SUBS = 4;
export const ENROL_MAX_PAYLOAD = 64 * 1024;
export const ENROL_ACCOUNT_MAX_CONNECTIONS = NODES_MAX_CONNECTIONS;
export const ENROL_ACCOUNT_MAX_SUBS = ENROL_ACCOUNT_MAX_CONNECTIONS * ENROL_MAX_SUBS;
/**
 * ENROL's revocation of every user issued up to a second stays this far behind now: a code minted on another
 * console (its clock a little off) whose record is not yet in the bucket, or not yet read, is never cut by it.
 */
export const ENROL_REVOKE_ALL_MARGIN_S = 60;
/** Each stream's bounds: per node (per subject) and in all, and the largest message it keeps. */
export const REPORTS_PER_NODE = 100;
export const REPORT_MAX_MSG_BYTES = 256 * 1024;
export const REPORTS_MAX_BYTES = 256 * 1024 * 1024;
export const REKEY_PER_NODE = 4;
export const REKEY_MAX_BYTES = 16 * 1024 * 1024;
export const ENROL_PER_NODE = 4;
export const ENROL_MAX_BYTES = 16 * 1024 * 1024;
export const DECLARE_MAX_BYTES = 512 * 1024 * 1024;
export const STREAM_MAX_MSG_BYTES = 1024 * 1024;
/**
 * A spent code's enrolling user is revoked this long after its answer (batched): not on the answer's heels, and
 * long enough for a node whose answer was lost to ask again (every ENROL_ASK_AGAIN_MS) and be answered again.
 */
export const ENROL_REVOKE_DELAY_MS = 6_000;
/**
 * At most one push of spent enrolling users' revocations this often: each makes every server apply the account's
 * claims anew, and nats-server 2.9 then decodes and checks the user JWT of every client of that account (on NODES
 * with 10,000 nodes connected: most of a core a push). The spent code is refused by the controller meanwhile; only
 * its user's connection waits; DELAY + EVERY stays under ENROL_SPENT_HOLD_MS, past which ENROL's floor cuts it.
 */
export const ENROL_REVOKE_EVERY_MS = 5_000;
export const ENROL_ASK_AGAIN_MS = 2_000;
/** A code spent this lately still holds ENROL's revocation of every older user below it: its answer's on its way. */
export const ENROL_SPENT_HOLD_MS = 3 * ENROL_REVOKE_DELAY_MS;
/** After the last batch of spent codes' revocations, ENROL's list is pruned once ENROL_REVOKE_ALL_MARGIN_S has passed. */
export const ENROL_PRUNE_AFTER_MS = ENROL_REVOKE_ALL_MARGIN_S * 1000 + ENROL_REVOKE_DELAY_MS;
/** How long the servers are given to take an account's new claims (a revocation) over the system account. */
export const CLAIMS_UPDATE_MS = 10_000;
/**
 * How long every server is given to say which nodes listen for plans (`$SYS.REQ.ACCOUNT.<NODES>.SUBSZ`): a request
 * across accounts to a node that is not there is never "no responders", only a timeout.
 */
export const PLAN_LISTENING_MS = 1_000;
/** `mesh push --wait-s`: how long the reports are waited for. */
export const PUSH_WAIT_S = 60;
/** A progress line on a terminal is drawn again this often, so its seconds move while nothing else does. */
export const PROGRESS_REDRAW_MS = 1_000;
/** The fleet view is written at most this often, however many heartbeats a second arrive. */
export const FLEET_WRITE_MS = 1_000;
/** A cell of `mesh nodes` shows at most this much of what a node said (its version): a table stays a table. */
export const FLEET_CELL_CHARS = 64;
/** `mesh up` says the same line (a node repeating a wrong message) at most once this often, counting the rest. */
export const UP_SAID_REPEAT_MS = 60_000;
/** How many pushes a node's record remembers (serial, stream seq, digest), to name a report's serial. */
export const PUSHES_KEPT = 20;
/** The controller's KV buckets: one copy a server up to this many (a majority of 3 outlives one machine). */
export const KV_REPLICAS_MAX = 3;
/** A compare-and-set lost to another writer is read again and tried again, this many times in all. */
export const KV_CAS_TRIES = 50;
/** Listing a bucket: how many keys are read at once. */
export const KV_LIST_BATCH = 200;
/** A push's declarations: how many are published before their acks are awaited (each node's stream subject is its own). */
export const PUSH_PUBLISH_BATCH = 200;
/** `mesh up` looks at the node and code buckets this often, besides being told of each change as it happens. */
export const KV_RESYNC_MS = 5_000;
/** A change to the buckets is acted on after this quiet, so a burst of node adds costs one read. */
export const KV_SETTLE_MS = 100;
/** `mesh node add --expires`: how long an enrolment code is good for, unless the operator says. */
export const CODE_EXPIRES_S = 24 * 3600;
/** The longest `--expires` taken: a code is a key to the mesh, and a year-old one is a forgotten one. */
export const CODE_EXPIRES_MAX_S = 30 * 24 * 3600;
/** ENROL keeps a question as long as the longest-lived code could ask it. */
export const ENROL_MAX_AGE_S = CODE_EXPIRES_MAX_S;
/**
 * Heartbeats a node may have handled per window (a node sends one every HEARTBEAT_S): past it, its heartbeats
 * are dropped unread and counted, so a flood costs that node's entries, never another's or the controller's link.
 */
export const HEARTBEAT_BUDGET = 20;
export const HEARTBEAT_WINDOW_MS = 10_000;
/** How often `mesh up` says which nodes' heartbeats it dropped (and adds them to their fleet entries). */
export const FLOOD_LOG_MS = 60_000;
/** `mesh report --serial`: the longest a read through the node's reports may take. */
export const REPORT_READ_MS = 30_000;
/** `mesh rollout`: the health gate looks at the heartbeats heard this often. */
export const ROLLOUT_POLL_MS = 200;
/** `mesh rollout` defaults: the waves, the gate, how many nodes may fail before it halts. */
export const ROLLOUT_WAVES = "10%,50%,100%";
export const ROLLOUT_GATE_S = 120;
/** `mesh-jobs` keeps this many jobs (push, plan, rollout), the newest. */
export const JOBS_KEPT = 200;
/** A push refused for what it removes names this many resources a node, then how many more. */
export const REMOVALS_NAMED = 5;
/** `mesh plan --wait-s`: how long a node connected to the bus has to answer; an offline node is said at once. */
export const PLAN_WAIT_S = 20;
/**
 * A node's plan answer fits one core message (the server's max_payload is 1 MB): past this, the diffs and then
 * the unchanged lines are left out, and the answer says so.
 */
export const MAX_PLAN_ANSWER_BYTES = 768 * 1024;
/** REPORTS keeps a month: the fleet view needs the newest, an operator's inquiry a little more. */
export const REPORTS_MAX_AGE_S = 30 * 24 * 3600;
// The link: its timeouts (the names protocol.md composes are src/vocabulary/subjects.ts).

/** One server: TCP, the server's INFO, the TLS handshake and CONNECT, each dial. */
export const DIAL_TIMEOUT_MS = 5_000;
/** A link's dial (each server in turn) and bind together: past it the attempt is given up and dialled again. */
export const LINK_OPEN_MS = 90_000;
/** The pin's preflight, its certificate read, closes politely; past this it is cut off regardless. */
export const PREFLIGHT_CLOSE_MS = 2_000;
/** The client's own pings find a server that went away without closing; the run loop then dials again. */
export const PING_INTERVAL_MS = 20_000;
export const MAX_PINGS_OUT = 2;
/**
 * A pull request's life. Long, so an idle node sends one request per this long; the server's idle
 * heartbeats (every 30 s, the client's ceiling) say the pull is alive meanwhile.
 */
export const PULL_EXPIRES_MS = 5 * 60_000;
/** A failed pull is tried again after this, times the failures in a row, up to the max; past the count, the link closes. */
export const PULL_RETRY_MS = 250;
export const PULL_RETRY_MAX_MS = 2_000;
export const PULL_FAILURES_MAX = 5;
/** How long the link looks for a newer declaration the server's count says waits (a stale one waits it out); ≥ 1 s. */
export const NEWER_LOOK_MS = 2_000;
/** A node reading directly (protocol.md "Direct reads"): how long one direct get of its last declaration waits. */
export const DECLARE_GET_TIMEOUT_MS = 10_000;
/** How often a node reading directly looks though no wake-up came (a core message, lost with its route), ±10%. */
export const DECLARE_LOOK_MS = 5 * 60_000;
/**
 * A wake-up whose declaration a replica behind the stream's leader does not return yet: asked again after this,
 * doubling up to the max, for up to DECLARE_CATCH_UP_FOR_MS.
 */
export const DECLARE_CATCH_UP_MS = 250;
export const DECLARE_CATCH_UP_MAX_MS = 5_000;
export const DECLARE_CATCH_UP_FOR_MS = 120_000;
/**
 * How long a node's heartbeats may go on naming a declaration older than its last push before `mesh up` wakes it
 * again, at most REWAKE_TRIES times a push: a wake-up lost with a server, or a dial answered by a replica still
 * catching up, is found in a minute or two, not at the next look.
 */
export const REWAKE_AFTER_MS = 60_000;
export const REWAKE_TRIES = 3;
/** How long a report's publish, an ack and a term wait for the server's word. */
export const SERVER_ACK_TIMEOUT_MS = 5_000;
/** The longest INFO line a preflight reads before deciding it is not talking to a NATS server. */
export const MAX_INFO_BYTES = 64 * 1024;
// Releases (protocol.md "Releases"): the mesh's object store of host releases, and a node fetching from it.

/** A release object's chunk: the NATS object stores' own default, well under any server's max_payload. */
export const RELEASE_CHUNK_BYTES = 128 * 1024;
/** How many chunks `mesh release add` has in flight at once. */
export const RELEASE_PUBLISH_WINDOW = 8;
/** One direct get of a release's meta or chunk: waits this long for the server. */
export const RELEASE_GET_TIMEOUT_MS = 10_000;
/** A fetch records where it stands every this many chunks (1 MiB), so a cut one resumes near where it stood. */
export const RELEASE_PROGRESS_CHUNKS = 8;
/** Room a release must leave on the disk beyond its own bytes, so installing it never fills the disk. */
export const RELEASE_SPACE_MARGIN_BYTES = 32 * 1024 * 1024;

/** How many entries a plan's line names (what a purge removes) before it says how many more: a line, not a listing. */
export const PLAN_NAMES_MAX = 10;
