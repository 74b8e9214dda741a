// The tools people use today, on the same N files under the same kind of temp root, when installed:
// CFEngine (`cf-agent -KI -f`, files promises with content and perms), Puppet (`puppet apply`, file resources)
// and Ansible (`ansible-playbook -c local`, one copy task looped over the files). `--peers` installs them
// from Debian's packages. Each writes its policy into the run's own state directory, untimed.
import { spawnSync } from "node:child_process";
import { existsSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import type { BenchFile } from "./fixture.ts";
import { failureOf, runTimed, which } from "./proc.ts";
import type { Measured, Runner, Target } from "./runners.ts";

export const PEER_PACKAGES = ["cfengine3", "puppet", "ansible-core"] as const;
/** Ansible takes ~0.46 s a file on this kind of machine: it runs at N = 100 only. */
export const ANSIBLE_MAX_N = 100;
const PEER_TIMEOUT_MS = 15 * 60_000;

export interface Peer {
  name: string;
  package: (typeof PEER_PACKAGES)[number];
  bin: string;
  runner: Runner | null;
  /** Why it is not run (not installed, or not at this size). */
  skipped?: string;
}

const abs = (t: Target, f: BenchFile) => join(t.root, f.path);

/** Every directory the files need, parents first (Puppet and Ansible do not make parents of a file). */
function dirsOf(t: Target): string[] {
  const dirs = new Set<string>();
  for (const f of t.ws.files) {
    const chain: string[] = [];
    for (let d = dirname(abs(t, f)); d !== t.root && !dirs.has(d); d = dirname(d)) chain.unshift(d);
    for (const d of chain) dirs.add(d);
  }
  return [...dirs];
}

/** A policy file written once per run directory (its paths are under that run's root). */
function policy(t: Target, name: string, make: () => string): string {
  const file = join(t.state, name);
  if (!existsSync(file)) writeFileSync(file, make(), { mode: 0o600 });
  return file;
}

/** CFEngine's quoted strings take newlines literally and know no `\\n`: the content goes in as it is. */
function cfString(s: string): string {
  if (/["\\$@]/.test(s)) throw new Error("the bench's content must not need quoting in a CFEngine policy");
  return `"${s}"`;
}

function cfenginePolicy(t: Target): string {
  const promises = t.ws.files
    .map(
      (f) =>
        `    "${abs(t, f)}"\n      create => "true",\n      perms => mesh_bench_mode,\n      content => ${cfString(f.content)};`,
    )
    .join("\n");
  return `body common control\n{\n  bundlesequence => { "mesh_bench" };\n}\n\nbody perms mesh_bench_mode\n{\n  mode => "0644";\n  rxdirs => "false";\n}\n\nbundle agent mesh_bench\n{\n  files:\n${promises}\n}\n`;
}

function puppetManifest(t: Target): string {
  const dirs = dirsOf(t).map((d) => `file { ${JSON.stringify(d)}: ensure => directory }`);
  const files = t.ws.files.map(
    (f) =>
      `file { ${JSON.stringify(abs(t, f))}: ensure => file, content => ${JSON.stringify(f.content)}, mode => '0644' }`,
  );
  return `${[...dirs, ...files].join("\n")}\n`;
}

/** A playbook as JSON (YAML reads it): the directories, then one copy task looped over the files. */
function ansiblePlaybook(t: Target): string {
  return JSON.stringify([
    {
      hosts: "localhost",
      gather_facts: false,
      tasks: [
        {
          name: "directories",
          "ansible.builtin.file": { path: "{{ item }}", state: "directory" },
          loop: dirsOf(t),
        },
        {
          name: "files",
          "ansible.builtin.copy": { dest: "{{ item.dest }}", content: "{{ item.content }}", mode: "0644" },
          loop: t.ws.files.map((f) => ({ dest: abs(t, f), content: f.content })),
        },
      ],
    },
  ]);
}

function processRunner(
  name: string,
  argvFor: (t: Target) => string[],
  env?: (t: Target) => NodeJS.ProcessEnv,
): Runner {
  const run = async (t: Target): Promise<Measured> => {
    const argv = argvFor(t);
    const r = await runTimed(argv, { timeoutMs: PEER_TIMEOUT_MS, env: { ...process.env, ...env?.(t) } });
    return {
      ms: r.ms,
      peakKb: r.peakKb,
      ...(r.code === 0 && !r.timedOut ? {} : { failed: failureOf(r, name) }),
    };
  };
  return { name, kind: "process", first: run, check: run };
}

function versionOf(argv: string[], pattern: RegExp): string {
  const r = spawnSync(argv[0]!, argv.slice(1), { encoding: "utf8", timeout: 30_000 });
  return pattern.exec(`${r.stdout}\n${r.stderr}`)?.[1] ?? "";
}

/** The peers as runners, each null (with the reason) when its command is not installed. */
export function peers(opts: { quick: boolean }): Peer[] {
  const out: Peer[] = [];
  const cf = which("cf-agent");
  out.push({
    name: "CFEngine",
    package: "cfengine3",
    bin: "cf-agent",
    runner: cf
      ? {
          ...processRunner(
            `CFEngine ${versionOf([cf, "--version"], /CFEngine Core ([\d.]+)/)}`.trim(),
            (t) => [cf, "-K", "-I", "-f", policy(t, "policy.cf", () => cfenginePolicy(t))],
          ),
        }
      : null,
    ...(cf ? {} : { skipped: "cf-agent is not installed (`npm run bench -- --peers` installs cfengine3)" }),
  });
  const puppet = which("puppet");
  out.push({
    name: "Puppet",
    package: "puppet",
    bin: "puppet",
    runner: puppet
      ? {
          ...processRunner(`Puppet ${versionOf([puppet, "--version"], /^([\d.]+)/m)}`.trim(), (t) => [
            puppet,
            "apply",
            "--vardir",
            join(t.state, "puppet-var"),
            "--confdir",
            join(t.state, "puppet-conf"),
            "--logdir",
            join(t.state, "puppet-log"),
            policy(t, "manifest.pp", () => puppetManifest(t)),
          ]),
          reps: 3,
        }
      : null,
    ...(puppet ? {} : { skipped: "puppet is not installed (`npm run bench -- --peers` installs puppet)" }),
  });
  const ansible = which("ansible-playbook");
  const ansibleRunner: Runner | null = ansible
    ? {
        ...processRunner(
          `Ansible ${versionOf([ansible, "--version"], /core ([\d.]+)/)}`.trim(),
          (t) => [
            ansible,
            "-i",
            "localhost,",
            "-c",
            "local",
            "-e",
            "ansible_python_interpreter=/usr/bin/python3",
            policy(t, "playbook.json", () => ansiblePlaybook(t)),
          ],
          (t) => ({
            ANSIBLE_NOCOLOR: "1",
            ANSIBLE_RETRY_FILES_ENABLED: "0",
            ANSIBLE_HOME: join(t.state, "ansible-home"),
            ANSIBLE_LOCAL_TEMP: join(t.state, "ansible-tmp"),
          }),
        ),
        reps: 1,
        maxN: ANSIBLE_MAX_N,
        maxNWhy: "Ansible takes ~0.46 s a file here: run at N = 100 only",
      }
    : null;
  out.push({
    name: "Ansible",
    package: "ansible-core",
    bin: "ansible-playbook",
    runner: opts.quick ? null : ansibleRunner,
    ...(ansible
      ? opts.quick
        ? {
            skipped:
              "Ansible is installed but not run by --quick (~46 s an apply at N = 100); the full run runs it at N = 100",
          }
        : {}
      : { skipped: "ansible-playbook is not installed (`npm run bench -- --peers` installs ansible-core)" }),
  });
  return out;
}

/** `apt-get install -y` the peers (after one `apt-get update`); says what it did. */
export function installPeers(say: (line: string) => void): void {
  const missing = PEER_PACKAGES.filter((p) => spawnSync("dpkg", ["-s", p], { stdio: "ignore" }).status !== 0);
  if (!missing.length) {
    say("peers: cfengine3, puppet and ansible-core are installed");
    return;
  }
  say(`peers: apt-get install -y ${missing.join(" ")}`);
  const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
  const update = spawnSync("apt-get", ["update", "-qq"], { stdio: "inherit", env });
  if (update.status !== 0) say(`peers: apt-get update exited ${update.status}`);
  const install = spawnSync("apt-get", ["install", "-y", "-qq", ...missing], {
    stdio: ["ignore", "ignore", "inherit"],
    env,
  });
  if (install.status !== 0)
    say(`peers: apt-get install exited ${install.status}; the peers that are missing are skipped`);
}
