// The release manifest (protocol.md "Releases"): signed by the mesh key, read back only if that key signed it,
// and the names a release's object goes by, as NATS object stores spell them.
import { describe, expect, it } from "vitest";
import {
  makeMeshKey,
  type ReleaseManifest,
  releaseMetaSubject,
  releaseObjectName,
  signManifest,
  verifyManifest,
} from "../../src/vocabulary/index.ts";

const manifest: ReleaseManifest = {
  v: 1,
  version: "0.2.0",
  kind: "linux",
  arch: "x64",
  sha256: "a".repeat(64),
  size: 100,
  encoding: "zstd",
  stored: { sha256: "b".repeat(64), size: 40 },
  file: "mesh-host-0.2.0-linux-x64",
  added_at: "2026-12-04T12:00:00.000Z",
};

describe("the release manifest", () => {
  const mesh = makeMeshKey();

  it("reads back what the mesh key signed", () => {
    expect(verifyManifest(signManifest(manifest, mesh.privateKey), mesh.publicB64)).toEqual({
      ok: true,
      manifest,
    });
  });

  it("refuses another key's signature, an altered body, a malformed one and none, each in one line", () => {
    const other = signManifest(manifest, makeMeshKey().privateKey);
    expect(verifyManifest(other, mesh.publicB64)).toEqual({
      ok: false,
      reason: "the release's manifest is not signed by the mesh key",
    });
    const signed = JSON.parse(signManifest(manifest, mesh.privateKey));
    const altered = JSON.stringify({ ...signed, body: signed.body.replace('"size":100', '"size":101') });
    expect(verifyManifest(altered, mesh.publicB64)).toMatchObject({
      ok: false,
      reason: /not signed by the mesh key/,
    });
    const wrongShape = signManifest({ ...manifest, kind: "bsd" } as never, mesh.privateKey);
    expect(verifyManifest(wrongShape, mesh.publicB64)).toEqual({
      ok: false,
      reason: "the release's signed manifest is malformed",
    });
    expect(verifyManifest("{", mesh.publicB64)).toMatchObject({ ok: false, reason: /not a signed manifest/ });
    expect(verifyManifest(undefined, mesh.publicB64)).toEqual({
      ok: false,
      reason: "the release carries no manifest",
    });
  });

  it("names an object version/kind/arch, its meta subject in padded URL-safe base64 as NATS object stores do", () => {
    expect(releaseObjectName("0.2.0", "arch", "arm64")).toBe("0.2.0/arch/arm64");
    expect(releaseMetaSubject("a")).toBe("$O.mesh-releases.M.YQ==");
    expect(releaseMetaSubject("ab")).toBe("$O.mesh-releases.M.YWI=");
    expect(releaseMetaSubject("abc")).toBe("$O.mesh-releases.M.YWJj");
    expect(releaseMetaSubject("0.2.0/linux/x64")).toBe(
      `$O.mesh-releases.M.${Buffer.from("0.2.0/linux/x64").toString("base64").replaceAll("+", "-").replaceAll("/", "_")}`,
    );
  });
});
