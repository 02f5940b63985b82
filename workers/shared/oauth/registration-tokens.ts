import { sha256 } from "../../../durable-objects/contract/crypto";

/**
 * Dynamic Client Registration's two bearer tokens (issue 40; RFC 7591 §3, RFC 7592 §1.2). Each is
 * 256 random bits shown once and stored as a SHA-256 (a fast hash is enough for a random value), under
 * a label of its own so one kind can never be presented as the other.
 */

/** An initial access token: lets one client (or, multi-use, several) register at one tenant. */
export const INITIAL_TOKEN_PREFIX = "kwi_";
/** A client's registration access token: reads, replaces and deletes that client's registration. */
export const REGISTRATION_TOKEN_PREFIX = "kwr_";

export const hashInitialAccessToken = (token: string) => sha256(`initial-access-token:${token}`);
export const hashRegistrationAccessToken = (token: string) => sha256(`registration-access-token:${token}`);
