// A self-signed certificate made for one run, with openssl: P-256, SAN 127.0.0.1 and localhost.
import { createHash, X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { selfSigned } from "../../src/mesh/index.ts";

export interface MadeCert {
  certFile: string;
  keyFile: string;
  certPem: string;
  keyPem: string;
  /** SHA-256 of the DER certificate, lower-case hex, no colons (protocol.md "Encodings"). */
  fingerprint: string;
}

/** Make `<name>.pem` and `<name>.key` in `dir`. `cn` only tells two certificates apart in a log. */
export function makeCert(dir: string, name = "server", cn = "mesh-double"): MadeCert {
  const certFile = join(dir, `${name}.pem`);
  const keyFile = join(dir, `${name}.key`);
  selfSigned({ keyFile, certFile, days: 2, cn, names: ["IP:127.0.0.1", "DNS:localhost"] });
  const certPem = readFileSync(certFile, "utf8");
  return {
    certFile,
    keyFile,
    certPem,
    keyPem: readFileSync(keyFile, "utf8"),
    fingerprint: fingerprintOfPem(certPem),
  };
}

export function fingerprintOfPem(pem: string): string {
  return createHash("sha256").update(new X509Certificate(pem).raw).digest("hex");
}
