// What a link delivers, heard one at a time with a deadline: the link tests' way of saying "this came" or
// "nothing came", for both readers (a consumer's and a direct one).
import type { Delivered, Link } from "../../src/link/index.ts";
import { EVENT_WAIT_MS } from "../support/events.ts";

export type Next = IteratorResult<Delivered> | "nothing";

/**
 * The iterator's next delivery, or "nothing" when none came within `ms`; a pending next stays pending. A
 * delivery that must come is waited for up to EVENT_WAIT_MS; a short `ms` only where nothing must come.
 */
export class Hearing {
  private pending: Promise<IteratorResult<Delivered>> | null = null;
  private readonly iterator: AsyncIterator<Delivered>;
  constructor(link: Link) {
    this.iterator = link.declarations()[Symbol.asyncIterator]();
  }
  async next(ms = EVENT_WAIT_MS): Promise<Next> {
    this.pending ??= this.iterator.next();
    const timer = new Promise<"nothing">((r) => setTimeout(() => r("nothing"), ms));
    const got = await Promise.race([this.pending, timer]);
    if (got !== "nothing") this.pending = null;
    return got;
  }
  async delivered(ms = EVENT_WAIT_MS): Promise<Delivered> {
    const got = await this.next(ms);
    if (got === "nothing" || got.done) throw new Error(`no delivery within ${ms} ms`);
    return got.value;
  }
}
