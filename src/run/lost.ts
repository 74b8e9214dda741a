// How the run loop says a link refused or lost. Credentials the bus refused stay refused until the node enrols again
// (`mesh node rm`, or `mesh node reissue` replaced them): said once, then the redials (backing off to their
// longest wait) go on quietly, as the launcher waits for an enrolment, rather than a warning a minute for ever.
import type { Logger } from "../appliers/index.ts";

/** Say why the link is down; `refusedSaid`: the previous dial's credentials were refused, and that was said. */
export function sayLost(
  log: Logger,
  reason: string,
  credentialsRefused: boolean,
  refusedSaid: boolean,
): void {
  if (credentialsRefused && refusedSaid) log.debug({ err: reason }, "still refused by the bus");
  else if (credentialsRefused)
    log.warn({ err: reason }, "removed from its mesh: waiting, dialling again now and then");
  else log.warn({ err: reason }, "link lost or refused");
}
