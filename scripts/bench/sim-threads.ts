// The simulated fleet in worker threads (sim-worker.ts), a node to each in turn. One thread holding
// 10,000 nodes spent its event loop on them (a push at 3,000 kept it busy about 9 s: verifying, signing, TLS
// writes), and everything the bench does itself in that loop waited behind them: its listener's "heard", the
// functions it times, even its own dials, cut by the server's 2 s TLS handshake timeout. Here the bench's thread
// keeps only what it is told: each link's coming up, each enrolment's phase, and, when asked, each node's state.
import { Worker } from "node:worker_threads";

/** What the bench asks a thread. */
type Question = { op: "enrol"; name: string; code: string } | { op: "state" } | { op: "stop" };
/** A question as sent, answered by its id. */
export type Asked = { id: number } & Question;

/** A node as the bench reads it: why its last dial failed, and its last push's stages. */
export interface NodeState {
  name: string;
  failure: string | null;
  took: { digest: string; at: number } | null;
  acked: { digest: string; at: number } | null;
  /** The server its link is on now; null while it has none. */
  server: string | null;
  /** Reports in its outbox, not yet acknowledged. */
  waiting: number;
  /** The serial of the last declaration it took. */
  serial: number;
}

/** What a thread tells the bench: an answer, or something that happened. */
export type Told =
  | { event: "answer"; id: number; ok: true; value: unknown }
  | { event: "answer"; id: number; ok: false; message: string }
  | { event: "up"; name: string; at: number }
  | { event: "phase"; name: string; phase: string | null }
  | { event: "reissued" }
  | { event: "askedAgain" };

/**
 * One thread for the nodes, beside the bench's own. Two (a thread a core, here) starved the bus: the nodes took
 * both cores from the servers and controllers, and a cluster of 10,000 enrolled at 22 a second against 65 with
 * the nodes in the bench's own thread, its push cut after five minutes with 1,528 reported. The simulator's part
 * of the machine is then what it was, and the bench's thread is free of it.
 */
export const SIM_THREADS = 1;

/** tsx's hooks registered in the thread first: a worker does not take them from the bench's own flags. */
const boot = (entry: string) =>
  `import(${JSON.stringify(import.meta.resolve("tsx/esm/api"))}).then(({ register }) => { register(); return import(${JSON.stringify(entry)}); })`;

export class SimThreads {
  private readonly workers: Worker[];
  private readonly waiting = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  private nextId = 0;
  private nextWorker = 0;
  /** Enrolled, by name. */
  readonly enrolled = new Set<string>();
  /** When each node's link last came up. */
  readonly linkedAt = new Map<string, number>();
  /** Each link's coming up, as it happened: the dials a second after a restart. */
  readonly linkUps: number[] = [];
  /** The enrolments in flight, by node: "asking" or "reissuing". */
  readonly enrolling = new Map<string, string>();
  /** Enrolments cut by the bus before their answer, and asked again with a reissued code. */
  reissued = 0;
  /** Enrolments whose dial or answer failed (a handshake timed out in a storm), asked again with the same code. */
  askedAgain = 0;

  constructor(dir: string, heartbeatS: number, count = SIM_THREADS) {
    const entry = new URL("./sim-worker.ts", import.meta.url).href;
    this.workers = Array.from({ length: count }, () => {
      const w = new Worker(boot(entry), { eval: true, workerData: { dir, heartbeatS } });
      w.on("message", (told: Told) => this.heard(told));
      w.on("error", (e) => this.failAll(e));
      return w;
    });
  }

  /** Enrolled and started on the next thread in turn. */
  async enrol(name: string, code: string): Promise<void> {
    const w = this.workers[this.nextWorker++ % this.workers.length]!;
    await this.ask(w, { op: "enrol", name, code });
    this.enrolled.add(name);
  }

  /** Every node's state, from every thread. */
  async states(): Promise<NodeState[]> {
    const each = await Promise.all(this.workers.map((w) => this.ask(w, { op: "state" })));
    return (each as NodeState[][]).flat();
  }

  /** Every node stopped, then the threads. */
  async stop(): Promise<void> {
    await Promise.all(this.workers.map((w) => this.ask(w, { op: "stop" })));
    await this.terminate();
  }

  async terminate(): Promise<void> {
    await Promise.all(this.workers.map((w) => w.terminate()));
  }

  private ask(w: Worker, asked: Question) {
    const id = ++this.nextId;
    return new Promise<unknown>((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      w.postMessage({ id, ...asked } satisfies Asked);
    });
  }

  private heard(told: Told): void {
    switch (told.event) {
      case "answer": {
        const waiter = this.waiting.get(told.id);
        this.waiting.delete(told.id);
        if (told.ok) waiter?.resolve(told.value);
        else waiter?.reject(new Error(told.message));
        return;
      }
      case "up":
        this.linkedAt.set(told.name, told.at);
        this.linkUps.push(told.at);
        return;
      case "phase":
        if (told.phase) this.enrolling.set(told.name, told.phase);
        else this.enrolling.delete(told.name);
        return;
      case "reissued":
        this.reissued++;
        return;
      case "askedAgain":
        this.askedAgain++;
        return;
    }
  }

  /** A thread that died takes its questions with it: every one waiting is failed, so the bench says so. */
  private failAll(e: Error): void {
    for (const waiter of this.waiting.values()) waiter.reject(e);
    this.waiting.clear();
  }
}
