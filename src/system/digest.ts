// The one digest the host names what it read and wrote by.
import { hash } from "node:crypto";

/** One call, no Hash object: the drift check hashes two small files' worth per resource (issue 22). */
export const sha256 = (bytes: Uint8Array): string => hash("sha256", bytes, "hex");
