// The services behind the edge (court-web), over the Connect protocol, and the signed-in session.
//
// One transport to the page's own origin; every call but the four that sign in carries
// "authorization: Bearer <token>". The session (token, refresh token, expiries, the account) is kept
// in localStorage, so a reload or a second tab is signed in too; a token about to expire is traded
// for a new pair with RefreshToken first (one refresh at a time, whoever asks).
import { Code, ConnectError, createClient, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { timestampMs } from "@bufbuild/protobuf/wkt";
import { BotService } from "./gen/court/bot/v1/bot_pb.js";
import { type AuthResponse, LobbyService } from "./gen/court/lobby/v1/lobby_pb.js";
import { RankingService } from "./gen/court/ranking/v1/ranking_pb.js";
import { RulesService } from "./gen/court/rules/v1/rules_pb.js";

export interface Session {
  token: string;
  expires: number; // ms since the epoch
  refresh: string;
  refreshExpires: number;
  playerId: string;
  name: string;
  guest: boolean;
}

const KEY = "court.session";
const NO_TOKEN = new Set(["CreateAccount", "CreateGuest", "Login", "RefreshToken"]);
const EARLY_MS = 30_000; // refresh this long before the token expires

let session: Session | null = load();
const listeners: Array<(s: Session | null) => void> = [];

function load(): Session | null {
  try {
    const s = JSON.parse(localStorage.getItem(KEY) ?? "null") as Session | null;
    return s && s.token && s.refreshExpires > Date.now() ? s : null;
  } catch {
    return null;
  }
}

export function currentSession(): Session | null {
  return session;
}

export function onSession(f: (s: Session | null) => void): void {
  listeners.push(f);
}

export function setSession(auth: AuthResponse | null): void {
  session = auth
    ? {
        token: auth.token,
        expires: auth.expires ? timestampMs(auth.expires) : Date.now() + 60_000,
        refresh: auth.refreshToken,
        refreshExpires: auth.refreshExpires ? timestampMs(auth.refreshExpires) : Date.now() + 86_400_000,
        playerId: auth.account?.playerId ?? "",
        name: auth.account?.name ?? "",
        guest: auth.account?.guest ?? false,
      }
    : null;
  if (session) localStorage.setItem(KEY, JSON.stringify(session));
  else localStorage.removeItem(KEY);
  for (const f of listeners) f(session);
}

// Another tab signed in, out, or refreshed: take its session (refresh tokens work once).
window.addEventListener("storage", (e) => {
  if (e.key === KEY) {
    session = load();
    for (const f of listeners) f(session);
  }
});

let refreshing: Promise<void> | null = null;

async function freshToken(): Promise<string> {
  if (!session) throw new ConnectError("sign in first (or play as a guest)", Code.Unauthenticated);
  if (session.expires - EARLY_MS > Date.now()) return session.token;
  if (!refreshing) {
    const s = session;
    refreshing = lobbyNoAuth
      .refreshToken({ refreshToken: s.refresh })
      .then((auth) => setSession(auth))
      .catch((err: unknown) => {
        // Another tab may have used the refresh token already: take its session if it has one.
        const other = load();
        if (other && other.token !== s.token) {
          session = other;
          return;
        }
        if (ConnectError.from(err).code === Code.Unauthenticated) setSession(null);
        throw err;
      })
      .finally(() => {
        refreshing = null;
      });
  }
  await refreshing;
  return session!.token;
}

const auth: Interceptor = (next) => async (req) => {
  if (!NO_TOKEN.has(req.method.name)) req.header.set("authorization", `Bearer ${await freshToken()}`);
  return next(req);
};

// A unary call the edge answers UNAVAILABLE (a service it cannot reach for now) is sent again, the
// same request, a few times with a growing pause: every mutating call carries its request_id, so a
// retry is applied once (lobby.proto: "retry with the same request_id"). Not CreateAccount (a
// retry after a lost answer would say the name is taken), and never a stream (WatchGame resumes
// from the last move it saw instead).
const RETRY_PAUSES_MS = [150, 400, 1000, 2500];
const retry: Interceptor = (next) => async (req) => {
  for (let i = 0; ; i++) {
    try {
      return await next(req);
    } catch (err) {
      const e = ConnectError.from(err);
      if (req.stream || req.method.name === "CreateAccount" || e.code !== Code.Unavailable || i >= RETRY_PAUSES_MS.length || req.signal.aborted) throw err;
      await new Promise((r) => setTimeout(r, RETRY_PAUSES_MS[i]));
    }
  }
};

const baseUrl = location.origin;
const plain = createConnectTransport({ baseUrl, interceptors: [retry] });
const transport = createConnectTransport({ baseUrl, interceptors: [retry, auth] });
const lobbyNoAuth = createClient(LobbyService, plain);

export const lobby = createClient(LobbyService, transport);
export const rules = createClient(RulesService, transport);
export const ranking = createClient(RankingService, transport);
export const bot = createClient(BotService, transport);

// A fresh request id (crypto.randomUUID needs a secure context; plain http on a LAN address is not).
export function requestId(): string {
  const b = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}

// An error as a sentence a person can act on.
export function errorText(err: unknown): string {
  const e = ConnectError.from(err);
  // fetch itself failed (no answer at all: the edge is down or the network is gone)
  if (e.code === Code.Unknown && /fetch|network/i.test(e.rawMessage)) return "the server cannot be reached now; try again";
  if (e.code === Code.Unavailable) return `the server cannot be reached now (${e.rawMessage}); try again`;
  if (e.code === Code.Unauthenticated) return `sign in again: ${e.rawMessage}`;
  return e.rawMessage || Code[e.code];
}

export { Code, ConnectError };
