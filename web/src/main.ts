// Court's web table: pages by the URL's hash (#/, #/lobby/<id>, #/game/<id>, #/watch/<id>,
// #/ranking, #/history, #/replay/<id>, #/account), each drawn from the public APIs only.
import { create, toJsonString } from "@bufbuild/protobuf";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { bot, Code, ConnectError, currentSession, errorText, lobby, onSession, ranking, requestId, rules, setSession } from "./api.js";
import { clear, h } from "./dom.js";
import { describeAction, describeEvent, Names, renderTable, scoreText, TITLES, actionKey, type TableUI } from "./games.js";
import { GameOptionsSchema, type GameOptions } from "./gen/court/games/v1/events_pb.js";
import { type Lobby, LobbySchema, LobbyState } from "./gen/court/lobby/v1/lobby_pb.js";
import { EntryKind, Metric } from "./gen/court/ranking/v1/ranking_pb.js";
import type { Action } from "./gen/court/rules/v1/actions_pb.js";
import type { GameUpdate, GameView } from "./gen/court/rules/v1/rules_pb.js";

const app = document.getElementById("app")!;
const nav = document.getElementById("nav")!;
const toastEl = document.getElementById("toast")!;
let leave: (() => void) | null = null; // stops the current page's streams and timers

function toast(msg: string, kind: "error" | "info" = "error"): void {
  clear(toastEl, h("p", { class: kind, role: kind === "error" ? "alert" : "status" }, msg));
}

async function attempt<T>(f: () => Promise<T>): Promise<T | undefined> {
  try {
    toastEl.replaceChildren();
    return await f();
  } catch (err) {
    toast(errorText(err));
    return undefined;
  }
}

function go(hash: string): void {
  if (location.hash === hash) void route();
  else location.hash = hash;
}

// ------------------------------------------------------------------------------------ header

const balanceEl = h("span", { id: "balance", "aria-live": "polite" });

async function refreshBalance(): Promise<void> {
  const s = currentSession();
  if (!s) return balanceEl.replaceChildren();
  try {
    const b = await ranking.getBalance({});
    clear(balanceEl, `${b.points} rank points`);
    balanceEl.dataset.points = String(b.points);
  } catch {
    balanceEl.replaceChildren();
  }
}

function drawNav(): void {
  const s = currentSession();
  clear(
    nav,
    h("a", { href: "#/", class: "brand" }, "♛ Court"),
    h("a", { href: "#/" }, "Play"),
    h("a", { href: "#/ranking" }, "Ranking"),
    h("a", { href: "#/history" }, "History"),
    h(
      "span",
      { class: "me" },
      s ? [h("a", { href: "#/account", id: "me" }, s.name + (s.guest ? " (guest)" : "")), " ", balanceEl] : h("a", { href: "#/account" }, "Sign in"),
    ),
  );
}
onSession(() => {
  drawNav();
  void refreshBalance();
});

// ------------------------------------------------------------------------------------ account

function accountPage(): HTMLElement {
  const s = currentSession();
  const name = h("input", { name: "name", autocomplete: "username", required: true, minlength: 2, maxlength: 24 }) as HTMLInputElement;
  const pw = h("input", { name: "password", type: "password", autocomplete: "current-password", required: true, minlength: 8 }) as HTMLInputElement;
  const after = () => go(sessionStorage.getItem("court.after") ?? "#/");
  const form = (label: string, call: () => Promise<unknown>) =>
    h("button", {
      type: "button",
      onclick: (async () => {
        if (await attempt(call)) after();
      }) as EventListener,
    }, label);
  return h(
    "main",
    { class: "page narrow" },
    h("h1", null, s ? `Signed in as ${s.name}` : "Play cards with Court"),
    s ? h("p", null, s.guest ? "A guest plays local games; register to play online for rank points. " : "", h("button", { onclick: (() => { setSession(null); go("#/account"); }) as EventListener }, "Sign out")) : null,
    h("section", { class: "card-box" },
      h("h2", null, "Play as a guest"),
      h("p", null, "No password: local games against bots, at once."),
      h("button", { class: "primary", id: "guest", onclick: (async () => {
        const auth = await attempt(() => lobby.createGuest({}));
        if (auth) { setSession(auth); after(); }
      }) as EventListener }, "Play as a guest"),
    ),
    h("section", { class: "card-box" },
      h("h2", null, "Register or sign in"),
      h("form", { onsubmit: ((e: Event) => e.preventDefault()) as EventListener },
        h("label", null, "Name ", name),
        h("label", null, "Password ", pw),
        h("div", { class: "row" },
          form("Register", async () => { const a = await lobby.createAccount({ name: name.value, password: pw.value }); setSession(a); return a; }),
          form("Sign in", async () => { const a = await lobby.login({ name: name.value, password: pw.value }); setSession(a); return a; }),
        ),
      ),
    ),
  );
}

// ------------------------------------------------------------------------------------ home: new games, lobbies

const GAMES = Object.keys(TITLES);

function optionsFields(game: string): HTMLElement {
  const num = (name: string, label: string, value: number, min: number, max: number) =>
    h("label", null, label + " ", h("input", { name, type: "number", value, min, max }));
  switch (game) {
    case "queens_court": return h("span", null, num("players", "Players", 2, 2, 4));
    case "hearts": return h("span", null, num("limit", "Game to", 100, 1, 10000));
    case "the_court":
      return h("label", null, "Mode ", h("select", { name: "mode" }, ...["solitaire", "free_gift", "mutual_swap", "burn", "shared"].map((m) => h("option", { value: m }, m.replace("_", " ")))));
    case "court_wars": return h("span", null, num("players", "Players", 2, 2, 4), num("turn_limit", "Turn limit", 500, 1, 500));
  }
  return h("span");
}

function readOptions(game: string, form: HTMLElement): GameOptions {
  const val = (n: string) => (form.querySelector(`[name="${n}"]`) as HTMLInputElement | null)?.value ?? "";
  const int = (n: string) => (val(n) ? Number(val(n)) : undefined);
  switch (game) {
    case "queens_court": return create(GameOptionsSchema, { game: { case: "queensCourt", value: { players: int("players") } } });
    case "hearts": return create(GameOptionsSchema, { game: { case: "hearts", value: { limit: int("limit") } } });
    case "the_court": return create(GameOptionsSchema, { game: { case: "theCourt", value: { mode: val("mode") || undefined } } });
    case "court_wars": return create(GameOptionsSchema, { game: { case: "courtWars", value: { players: int("players"), turnLimit: int("turn_limit") } } });
  }
  return create(GameOptionsSchema, {});
}

async function fillWithBots(l: Lobby, level: string): Promise<Lobby> {
  while (l.seats.some((s) => !s.playerId)) {
    l = await lobby.setBotSeat({ requestId: requestId(), lobbyId: l.lobbyId, level });
  }
  return l;
}

function newGameForm(): HTMLElement {
  const opts = h("span", { class: "opts" }, optionsFields("queens_court"));
  const game = h("select", { name: "game", onchange: ((e: Event) => clear(opts, optionsFields((e.target as HTMLSelectElement).value))) as EventListener },
    ...GAMES.map((g) => h("option", { value: g }, TITLES[g])));
  const form = h("form", { class: "new-game", onsubmit: ((e: Event) => e.preventDefault()) as EventListener },
    h("label", null, "Game ", game), opts,
    h("label", null, "Bots ", h("select", { name: "level" }, ...["heuristic", "random", "expert"].map((l) => h("option", { value: l }, l)))),
    h("label", null, "Turn clock (s, 0: none) ", h("input", { name: "turn_seconds", type: "number", value: 0, min: 0, max: 600 })),
    h("label", null, "Time bank (s) ", h("input", { name: "time_bank_seconds", type: "number", value: 60, min: 0, max: 3600 })),
    h("label", null, h("input", { name: "online", type: "checkbox" }), " Online (rank points)"),
    h("label", null, "Ante ", h("input", { name: "ante", type: "number", value: 0, min: 0 })),
    h("label", null, h("input", { name: "private", type: "checkbox" }), " Private (invite code)"),
    h("div", { class: "row" },
      h("button", { class: "primary", id: "play-bots", type: "button", onclick: (() => void create_(true)) as EventListener }, "Play now with bots"),
      h("button", { id: "open-lobby", type: "button", onclick: (() => void create_(false)) as EventListener }, "Open a lobby"),
    ),
  );
  const create_ = async (withBots: boolean) => {
    const f = form as HTMLFormElement;
    const g = (f.elements.namedItem("game") as HTMLSelectElement).value;
    const el = (n: string) => f.elements.namedItem(n) as HTMLInputElement;
    const turn = Number(el("turn_seconds").value || 0);
    const l = await attempt(async () => {
      let l = await lobby.createLobby({
        requestId: requestId(),
        game: g,
        options: readOptions(g, f),
        online: el("online").checked,
        ante: BigInt(el("ante").value || 0),
        private: el("private").checked,
        turnSeconds: turn,
        timeBankSeconds: turn ? Number(el("time_bank_seconds").value || 0) : undefined,
      });
      if (withBots) {
        l = await fillWithBots(l, (f.elements.namedItem("level") as HTMLSelectElement).value);
        l = await lobby.startGame({ requestId: requestId(), lobbyId: l.lobbyId });
      }
      return l;
    });
    if (!l) return;
    go(l.gameId ? `#/game/${l.gameId}` : `#/lobby/${l.lobbyId}`);
  };
  return form;
}

function quickMatchForm(): HTMLElement {
  const game = h("select", { name: "game" }, ...GAMES.map((g) => h("option", { value: g }, TITLES[g]))) as HTMLSelectElement;
  const ante = h("input", { name: "ante", type: "number", value: 0, min: 0 }) as HTMLInputElement;
  return h("form", { onsubmit: ((e: Event) => e.preventDefault()) as EventListener },
    h("label", null, "Game ", game), h("label", null, "Ante ", ante),
    h("button", { type: "button", id: "quick-match", onclick: (async () => {
      const l = await attempt(() => lobby.quickMatch({ requestId: requestId(), game: game.value, ante: BigInt(ante.value || 0) }));
      if (l) go(`#/lobby/${l.lobbyId}`);
    }) as EventListener }, "Quick match"));
}

function joinByCodeForm(): HTMLElement {
  const id = h("input", { name: "lobby", placeholder: "lobby id", required: true }) as HTMLInputElement;
  const code = h("input", { name: "code", placeholder: "invite code" }) as HTMLInputElement;
  return h("form", { onsubmit: ((e: Event) => e.preventDefault()) as EventListener },
    h("label", null, "Lobby ", id), h("label", null, "Code ", code),
    h("button", { type: "button", id: "join-code", onclick: (() => go(`#/join/${encodeURIComponent(id.value.trim())}/${encodeURIComponent(code.value.trim())}`)) as EventListener }, "Join"));
}

function lobbyRow(l: Lobby): HTMLElement {
  const taken = l.seats.filter((s) => s.playerId).length;
  return h("li", null,
    h("a", { href: `#/lobby/${l.lobbyId}` }, `${TITLES[l.game] ?? l.game}`),
    ` · ${taken}/${l.seats.length} seated · ${l.online ? `online, ante ${l.ante}` : "local"}${l.turnSeconds ? ` · ${l.turnSeconds}s turns` : ""}`);
}

async function homePage(): Promise<HTMLElement> {
  if (!currentSession()) return accountPage();
  const list = h("ul", { class: "lobbies" }, h("li", null, "…"));
  const mine = h("ul", { class: "my-games" });
  const page = h("main", { class: "page" },
    h("section", { class: "card-box" }, h("h2", null, "New game"), newGameForm()),
    h("section", { class: "card-box" }, h("h2", null, "Your unfinished games"), mine),
    h("section", { class: "card-box" }, h("h2", null, "Quick match"), quickMatchForm(), h("h3", null, "Join by invite code"), joinByCodeForm()),
    h("section", { class: "card-box" }, h("h2", null, "Open lobbies"), list),
  );
  void attempt(async () => {
    const [ls, gs] = await Promise.all([lobby.listLobbies({ pageSize: 30 }), lobby.listMyGames({})]);
    clear(list, ...(ls.lobbies.length ? ls.lobbies.map(lobbyRow) : [h("li", null, "No open lobbies: open one.")]));
    clear(mine, ...(gs.games.length
      ? gs.games.map((g) => h("li", null, h("a", { href: `#/game/${g.gameId}` }, `${TITLES[g.game] ?? g.game}`), ` · seat ${g.seat}${g.online ? ` · online, ante ${g.ante}` : ""}`))
      : [h("li", null, "None.")]));
  });
  return page;
}

// ------------------------------------------------------------------------------------ a lobby

const STATE_WORDS: Record<number, string> = {
  [LobbyState.OPEN]: "open", [LobbyState.STARTING]: "starting", [LobbyState.STARTED]: "started",
  [LobbyState.CLOSED]: "closed", [LobbyState.FINISHED]: "finished", [LobbyState.ABANDONED]: "abandoned",
};

async function lobbyPage(id: string, code = ""): Promise<HTMLElement> {
  const me = currentSession()!.playerId;
  const body = h("div");
  const page = h("main", { class: "page narrow" }, body);
  let l: Lobby | undefined;
  let stopped = false;
  const act = async (f: () => Promise<Lobby>) => {
    const r = await attempt(f);
    if (r) draw(r);
  };
  let shown = "";
  const draw = (x: Lobby) => {
    const key = toJsonString(LobbySchema, x);
    if (key === shown) return; // the same lobby: keep the buttons under the pointer
    shown = key;
    l = x;
    if (l.gameId && (l.state === LobbyState.STARTED || l.state === LobbyState.FINISHED) && l.seats.some((s) => s.playerId === me)) {
      go(`#/game/${l.gameId}`);
      return;
    }
    const host = l.host === me;
    const seated = l.seats.some((s) => s.playerId === me);
    const level = h("select", { "aria-label": "Bot level" }, ...["heuristic", "random", "expert"].map((v) => h("option", { value: v }, v))) as HTMLSelectElement;
    const open = l.state === LobbyState.OPEN;
    clear(body,
      h("h1", null, `${TITLES[l.game] ?? l.game} lobby`),
      h("p", null, `${STATE_WORDS[l.state] ?? "?"} · ${l.online ? `online, ante ${l.ante}` : "local"} · ${l.private ? "private" : "public"}${l.turnSeconds ? ` · ${l.turnSeconds}s per turn` : " · no clock"}`),
      l.inviteCode ? h("p", { class: "invite" }, "Invite code: ", h("code", { id: "invite-code" }, l.inviteCode), " · link: ", h("code", null, `${location.origin}/#/join/${l.lobbyId}/${l.inviteCode}`)) : null,
      h("p", null, "Lobby id: ", h("code", { id: "lobby-id" }, l.lobbyId)),
      l.startError ? h("p", { class: "error" }, l.startError) : null,
      h("ol", { class: "seats", start: 0 }, ...l.seats.map((s) => h("li", { "data-seat": s.seat },
        s.playerId ? `${s.name || s.playerId}${s.playerId === l!.host ? " (host)" : ""}${s.ready ? " · ready" : ""}` : "open",
        host && open && !s.playerId ? h("button", { class: "small", "data-bot-seat": s.seat, onclick: (() => act(() => lobby.setBotSeat({ requestId: requestId(), lobbyId: id, seat: s.seat, level: level.value }))) as EventListener }, "Seat a bot") : null,
        host && open && s.playerId.startsWith("bot:") ? h("button", { class: "small", onclick: (() => act(() => lobby.setBotSeat({ requestId: requestId(), lobbyId: id, seat: s.seat, level: "" }))) as EventListener }, "Remove bot") : null,
        host && open && s.playerId && !s.playerId.startsWith("bot:") && s.playerId !== me ? h("button", { class: "small", onclick: (() => act(() => lobby.kickPlayer({ requestId: requestId(), lobbyId: id, seat: s.seat }))) as EventListener }, "Remove") : null,
      ))),
      open ? h("div", { class: "row" },
        host ? [h("label", null, "Bot level ", level), h("button", { class: "primary", id: "start", onclick: (() => act(() => lobby.startGame({ requestId: requestId(), lobbyId: id }))) as EventListener }, "Start the game")] : null,
        !seated ? h("button", { class: "primary", id: "join", onclick: (() => act(() => lobby.joinLobby({ requestId: requestId(), lobbyId: id, inviteCode: code }))) as EventListener }, "Take a seat") : null,
        seated && !host ? h("button", { id: "ready", onclick: (() => act(() => lobby.setReady({ requestId: requestId(), lobbyId: id, ready: !l!.seats.find((s) => s.playerId === me)?.ready }))) as EventListener }, "Ready") : null,
        seated ? h("button", { onclick: (async () => { if (await attempt(() => lobby.leaveLobby({ requestId: requestId(), lobbyId: id }))) go("#/"); }) as EventListener }, "Leave") : null,
        host ? h("button", { onclick: (() => act(() => lobby.cancelLobby({ requestId: requestId(), lobbyId: id, reason: "cancelled by the host" }))) as EventListener }, "Cancel lobby") : null,
      ) : null,
      l.gameId && !seated ? h("p", null, h("a", { href: `#/watch/${l.gameId}` }, "Watch the game")) : null,
    );
  };
  const first = await attempt(() => lobby.getLobby({ lobbyId: id }));
  if (!first) return h("main", { class: "page" }, h("p", null, "No such lobby. ", h("a", { href: "#/" }, "Back")));
  draw(first);
  // No lobby stream exists: look again every second while the page is open.
  const timer = setInterval(async () => {
    if (stopped) return;
    try { draw(await lobby.getLobby({ lobbyId: id })); } catch { /* shown on the next action */ }
  }, 1000);
  leave = () => { stopped = true; clearInterval(timer); };
  return page;
}

async function joinPage(id: string, code: string): Promise<HTMLElement> {
  const l = await attempt(() => lobby.joinLobby({ requestId: requestId(), lobbyId: id, inviteCode: code }));
  if (l) return lobbyPage(l.lobbyId, code);
  return h("main", { class: "page" }, h("p", null, "Could not join that lobby. ", h("a", { href: "#/" }, "Back")));
}

// ------------------------------------------------------------------------------------ the table

const accounts = new Map<string, string>();

async function namesFor(gv: GameView): Promise<Names> {
  await Promise.all(gv.seats.filter((p) => !p.startsWith("bot:") && !accounts.has(p)).map(async (p) => {
    try { accounts.set(p, (await lobby.getAccount({ playerId: p })).name); } catch { accounts.set(p, p.slice(0, 8)); }
  }));
  return new Names(gv.seats, accounts, gv.yourSeat);
}

function clockSpan(gv: GameView, seat: number): HTMLElement | null {
  const c = gv.seatClocks.find((x) => x.seat === seat);
  if (!c) return null;
  if (c.away) return h("span", { class: "badge away" }, "away: the bot plays");
  if (c.deadline) {
    const ms = Number(c.deadline.seconds) * 1000 + Math.floor(c.deadline.nanos / 1e6);
    return h("span", { class: "clock", "data-deadline": ms, role: "timer", "aria-label": "time left" }, countdown(ms));
  }
  return null;
}

function countdown(ms: number): string {
  const s = Math.max(0, Math.ceil((ms - Date.now()) / 1000));
  return `⏱ ${Math.floor(s / 60)}:${String(s % 60).padStart(2, "0")}`;
}

// The legal move a bot's suggestion stands for: itself, or (Hearts, passing) the first of its three
// cards as the one-card pass the legal list offers.
function hintedMove(a: Action, legal: Action[]): Action | undefined {
  const key = actionKey(a);
  const same = legal.find((x) => actionKey(x) === key);
  if (same) return same;
  const k = a.game.case === "hearts" ? a.game.value.kind : undefined;
  if (k?.case === "pass")
    return legal.find((x) => x.game.case === "hearts" && x.game.value.kind.case === "passCard" && k.value.cards.includes(x.game.value.kind.value.card));
  return undefined;
}

async function gamePage(id: string, watching: boolean): Promise<HTMLElement> {
  const abort = new AbortController();
  const gv0 = await attempt(() => rules.getView({ gameId: id }));
  if (!gv0) return h("main", { class: "page" }, h("p", null, "No such game. ", h("a", { href: "#/" }, "Back")));
  let gv: GameView = gv0;
  let names = await namesFor(gv);
  const log: string[] = [];
  const st = { busy: false, hint: "", hintText: "", selected: "" };
  const tableEl = h("div", { class: "table-wrap", id: "table", "aria-live": "off" });
  const side = h("aside", { class: "side" });
  const logEl = h("ol", { class: "log", "aria-live": "polite", "aria-label": "Latest moves" });
  const page = h("main", { class: "page game", "data-game": gv.game }, tableEl, side);
  const spectator = gv.yourSeat === undefined;
  const mySeat = gv.yourSeat;
  let challenges: HTMLElement | null = null;

  const submit = async (a: Action) => {
    if (st.busy) return;
    st.busy = true;
    draw();
    const seatClock = gv.seatClocks.find((c) => c.seat === mySeat);
    const r = await attempt(() => rules.submitAction({ gameId: id, requestId: requestId(), seat: mySeat, action: a, turnSeq: seatClock?.turnSeq || undefined }));
    st.busy = false;
    st.hint = "";
    st.hintText = "";
    if (r?.view && r.view.seq >= gv.seq) gv = r.view;
    draw();
  };
  const ui = (): TableUI => ({
    names, legal: spectator ? [] : gv.legalActions, busy: st.busy, hint: st.hint, selected: st.selected,
    select: (c) => { st.selected = c; draw(); (tableEl.querySelector(`button[data-card="${c}"]`) as HTMLElement | null)?.focus(); },
    submit: (a) => void submit(a),
    clock: (s) => clockSpan(gv, s),
  });
  const draw = () => {
    const focused = (document.activeElement as HTMLElement | null)?.getAttribute("aria-label");
    clear(tableEl, renderTable(gv, ui()));
    if (focused) (tableEl.querySelector(`[aria-label="${CSS.escape(focused)}"]`) as HTMLElement | null)?.focus();
    const mine = gv.seatClocks.find((c) => c.seat === mySeat);
    const toAct = mySeat !== undefined && gv.toAct.includes(mySeat);
    // The side panel's controls stay the same elements (shown, hidden, enabled in place): a bot
    // playing an away seat redraws the table many times a second, and a button must stay pressable.
    turnEl.textContent = gv.finished ? "Game over." : toAct ? "Your turn." : `Waiting for ${gv.toAct.map((s) => names.short(s)).join(", ") || "…"}`;
    scoreEl.textContent = scoreText(gv, names);
    winnersEl.textContent = gv.finished && gv.result?.winners.length ? `Won by ${gv.result.winners.map((s) => names.short(s)).join(", ")}` : "";
    controls.hidden = spectator || gv.finished;
    returnBtn.hidden = !mine?.away;
    awayBtn.hidden = !!mine?.away;
    suggestBtn.disabled = !toAct;
    awayNote.hidden = !mine?.away;
    hintEl.textContent = st.hintText ? `Bot: ${st.hintText}` : "";
    if (challenges && !challenges.isConnected) challengesSlot.replaceChildren(challenges);
    endLinks.hidden = !gv.finished;
  };
  const seatCall = async (f: () => Promise<{ view?: GameView }>) => {
    const r = await attempt(f);
    if (r?.view && r.view.seq >= gv.seq) gv = r.view;
    draw();
  };
  const turnEl = h("p", { id: "turn", class: "status" });
  const scoreEl = h("p", { id: "score" });
  const winnersEl = h("p", { class: "winners" });
  const returnBtn = h("button", { class: "primary", id: "return", onclick: (() => void seatCall(() => rules.returnToSeat({ gameId: id, requestId: requestId(), seat: mySeat }))) as EventListener }, "Return to my seat");
  const awayBtn = h("button", { id: "away", onclick: (() => void seatCall(() => rules.leaveSeat({ gameId: id, requestId: requestId(), seat: mySeat }))) as EventListener }, "Step away");
  const suggestBtn = h("button", { id: "suggest", onclick: (async () => {
    const r = await attempt(() => bot.suggest({ gameId: id, seat: mySeat, view: gv })); // the view on screen: no second read
    if (!r?.action) return;
    const hinted = hintedMove(r.action, gv.legalActions);
    st.hint = actionKey(hinted);
    st.hintText = r.explanation || describeAction(r.action, names);
    const qc = hinted?.game.case === "queensCourt" ? hinted.game.value.kind.value : undefined;
    if (qc) st.selected = qc.card; // show the piles of the card the bot would play
    draw();
  }) as EventListener }, "Suggest") as HTMLButtonElement;
  const controls = h("div", { class: "row" }, returnBtn, awayBtn, suggestBtn);
  const awayNote = h("p", { class: "away-note", role: "status" }, "You are away: the bot plays your turns until you return.");
  const hintEl = h("p", { class: "tip" });
  const challengesSlot = h("div");
  const endLinks = h("p", null, h("a", { href: `#/replay/${id}` }, "Replay"), " · ", h("a", { href: "#/" }, "New game"));
  clear(side,
    h("h1", null, TITLES[gv.game] ?? gv.game, watching || spectator ? h("span", { class: "badge" }, " watching") : null),
    turnEl, scoreEl, winnersEl, controls, awayNote, hintEl, h("h2", null, "Latest moves"), logEl, challengesSlot, endLinks,
  );
  const addEvents = (u: GameUpdate) => {
    for (const e of u.events) {
      const t = describeEvent(e, names);
      if (t) log.push(t);
    }
    const keep = log.slice(-12);
    clear(logEl, ...keep.map((t) => h("li", null, t)));
  };
  // Challenges belong to online games only (ranking knows no other): ask the lobby which this is.
  let online = false;
  if (!spectator && !gv.finished) {
    try { online = (await lobby.listMyGames({})).games.some((g) => g.gameId === id && g.online); } catch { /* none shown */ }
  }
  const loadChallenges = async () => {
    if (!online) return;
    try {
      const c = await ranking.getChallenges({ gameId: id });
      const seat = c.seats.find((s) => s.seat === mySeat) ?? c.seats[0];
      if (seat?.challenges.length)
        challenges = h("section", { class: "challenges" }, h("h2", null, "Challenges"),
          h("ul", null, ...seat.challenges.map((x) => h("li", { class: x.complete ? "done" : "" }, `${x.text} (${x.tier}) ${x.complete ? "✓" : x.progress}`))));
    } catch { /* a local game has no challenges */ }
  };
  const finish = async () => {
    await loadChallenges();
    await refreshBalance();
    draw();
    // The ranking service pays out once it has read the game's end: look at the balance again.
    for (const ms of [1500, 5000]) setTimeout(() => void refreshBalance(), ms);
  };
  await loadChallenges();
  draw();
  addEvents({ events: [] } as unknown as GameUpdate);
  const tick = setInterval(() => {
    for (const el of tableEl.querySelectorAll<HTMLElement>("[data-deadline]")) el.textContent = countdown(Number(el.dataset.deadline));
  }, 250);
  const keys = (e: KeyboardEvent) => {
    if (e.target instanceof HTMLInputElement || e.altKey || e.ctrlKey || e.metaKey) return;
    const n = Number(e.key);
    if (n >= 1 && n <= 9) (tableEl.querySelectorAll<HTMLButtonElement>("[data-move]")[n - 1])?.click();
    if (e.key === "s") (document.getElementById("suggest") as HTMLButtonElement | null)?.click();
  };
  document.addEventListener("keydown", keys);
  leave = () => { abort.abort(); clearInterval(tick); document.removeEventListener("keydown", keys); };
  if (gv.finished) void finish();
  // Follow the game: every move after the one shown, resumed from the last seen after a break.
  void (async () => {
    let wait = 500;
    while (!abort.signal.aborted && !gv.finished) {
      try {
        for await (const u of rules.watchGame({ gameId: id, seat: mySeat, afterSeq: gv.seq }, { signal: abort.signal })) {
          wait = 500;
          if (u.seq <= gv.seq && u.view?.seq !== gv.seq) continue;
          addEvents(u);
          if (u.view && u.view.seq >= gv.seq) {
            const seatsChanged = u.view.seats.join() !== gv.seats.join();
            gv = u.view;
            if (seatsChanged) names = await namesFor(gv);
          }
          draw();
          if (gv.finished) await finish();
        }
        if (!gv.finished) { const v = await rules.getView({ gameId: id }); if (v.seq >= gv.seq) gv = v; draw(); if (gv.finished) await finish(); }
      } catch (err) {
        if (abort.signal.aborted) return;
        const e = ConnectError.from(err);
        if (e.code === Code.NotFound || e.code === Code.PermissionDenied) return toast(errorText(err));
        await new Promise((r) => setTimeout(r, wait));
        wait = Math.min(wait * 2, 8000);
      }
    }
  })();
  return page;
}

// ------------------------------------------------------------------------------------ replay

async function replayPage(id: string): Promise<HTMLElement> {
  const updates: GameUpdate[] = [];
  const r = await attempt(async () => {
    for await (const u of rules.watchGame({ gameId: id, afterSeq: 0n })) updates.push(u);
    return true;
  });
  if (!r || !updates.length) return h("main", { class: "page" }, h("p", null, "No moves to replay. ", h("a", { href: "#/history" }, "Back")));
  const first = updates[0].view!;
  const names = await namesFor(first);
  let i = updates.length - 1;
  const body = h("div", { class: "table-wrap", id: "table" });
  const side = h("aside", { class: "side" });
  const step = (n: number) => { i = Math.max(0, Math.min(updates.length - 1, n)); draw(); };
  const draw = () => {
    const u = updates[i];
    const gv = u.view!;
    clear(body, renderTable(gv, { names, legal: [], busy: true, hint: "", selected: "", select: () => {}, submit: () => {}, clock: () => null }));
    clear(side,
      h("h1", null, `Replay: ${TITLES[gv.game] ?? gv.game}`),
      h("p", { id: "replay-pos" }, `Move ${i + 1} of ${updates.length}`),
      h("div", { class: "row" },
        h("button", { onclick: (() => step(0)) as EventListener, "aria-label": "First move" }, "⏮"),
        h("button", { id: "prev", onclick: (() => step(i - 1)) as EventListener, "aria-label": "Previous move" }, "◀"),
        h("button", { id: "next", onclick: (() => step(i + 1)) as EventListener, "aria-label": "Next move" }, "▶"),
        h("button", { onclick: (() => step(updates.length - 1)) as EventListener, "aria-label": "Last move" }, "⏭"),
      ),
      h("ul", { class: "log" }, ...u.events.map((e) => describeEvent(e, names)).filter(Boolean).map((t) => h("li", null, t!))),
      h("p", null, scoreText(gv, names)),
    );
  };
  draw();
  const keys = (e: KeyboardEvent) => { if (e.key === "ArrowLeft") step(i - 1); if (e.key === "ArrowRight") step(i + 1); };
  document.addEventListener("keydown", keys);
  leave = () => document.removeEventListener("keydown", keys);
  return h("main", { class: "page game" }, body, side);
}

// ------------------------------------------------------------------------------------ ranking, history

async function rankingPage(): Promise<HTMLElement> {
  const board = h("div");
  const game = h("select", { id: "board-game", onchange: (() => void drawBoard()) as EventListener }, ...GAMES.map((g) => h("option", { value: g }, TITLES[g]))) as HTMLSelectElement;
  const metric = h("select", { id: "board-metric", onchange: (() => void drawBoard()) as EventListener }, h("option", { value: Metric.RATING }, "rating"), h("option", { value: Metric.POINTS }, "points won")) as HTMLSelectElement;
  const drawBoard = async () => {
    const b = await attempt(() => ranking.getLeaderboard({ game: game.value, limit: 20, metric: Number(metric.value) }));
    if (!b) return;
    clear(board, h("table", { class: "board" }, h("thead", null, h("tr", null, h("th", null, "#"), h("th", null, "Player"), h("th", null, "Rating"), h("th", null, "Points"), h("th", null, "Games"))),
      h("tbody", null, ...b.rows.map((r) => h("tr", null, h("td", null, String(r.rank)), h("td", null, r.name), h("td", null, r.rating.toFixed(1)), h("td", null, String(r.points)), h("td", null, String(r.games)))))));
  };
  const ledger = h("div", { id: "ledger" });
  const profile = h("div", { id: "profile" });
  void attempt(async () => {
    const [p, hist] = await Promise.all([ranking.getProfile({}), ranking.getHistory({ pageSize: 50 })]);
    clear(profile, h("p", null, `${p.name}: `, h("strong", { id: "profile-points" }, `${p.points}`), ` rank points · ${p.games} ranked games`),
      h("ul", null, ...p.stats.map((s) => h("li", null, `${TITLES[s.game] ?? s.game}: rating ${s.rating.toFixed(1)} over ${s.played} games`))));
    clear(ledger, h("p", null, "Balance ", h("strong", { id: "ledger-balance" }, String(hist.balance))),
      h("table", { class: "board" }, h("thead", null, h("tr", null, h("th", null, "When"), h("th", null, "What"), h("th", null, "Change"), h("th", null, "Balance"))),
        h("tbody", null, ...hist.entries.map((e) => h("tr", null,
          h("td", null, e.time ? timestampDate(e.time).toLocaleString() : ""),
          h("td", null, `${EntryKind[e.kind]?.toLowerCase().replace("_", " ") ?? e.note}${e.game ? ` · ${TITLES[e.game] ?? e.game}` : ""}${e.gameId ? " " : ""}`, e.gameId ? h("a", { href: `#/replay/${e.gameId}` }, "replay") : null),
          h("td", null, (e.delta > 0 ? "+" : "") + String(e.delta)), h("td", null, String(e.balanceAfter)))))));
  });
  void drawBoard();
  return h("main", { class: "page" },
    h("section", { class: "card-box" }, h("h2", null, "Leaderboard"), h("div", { class: "row" }, game, metric), board),
    h("section", { class: "card-box" }, h("h2", null, "You"), profile, h("h2", null, "Ledger"), ledger));
}

async function historyPage(): Promise<HTMLElement> {
  // ListMyGames with include_finished: the account's unfinished games, then its finished ones,
  // newest first, 50 per page (a "More" button asks for the next page).
  const list = h("ul", { class: "history" });
  const more = h("button", { id: "history-more" }) as HTMLButtonElement;
  more.hidden = true;
  more.textContent = "More";
  let token = "";
  const load = async () => {
    const r = await attempt(() => lobby.listMyGames({ includeFinished: true, pageToken: token }));
    if (!r) return;
    if (!token && !r.games.length) list.append(h("li", null, "No games yet."));
    for (const g of r.games) list.append(h("li", null,
      `${TITLES[g.game] ?? g.game} · ${g.online ? "online" : "local"} · ${g.started ? timestampDate(g.started).toLocaleString() : ""} · ${g.finished ? "finished" : "running"} · `,
      h("a", { href: `#/game/${g.gameId}` }, "table"), " · ", h("a", { href: `#/replay/${g.gameId}` }, "replay")));
    token = r.nextPageToken;
    more.hidden = !token;
  };
  more.onclick = () => void load();
  await load();
  return h("main", { class: "page narrow" }, h("h1", null, "Your games"), list, more);
}

// ------------------------------------------------------------------------------------ routing

async function route(): Promise<void> {
  leave?.();
  leave = null;
  toastEl.replaceChildren();
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  const needsSession = parts[0] !== "account" && parts[0] !== "";
  if (needsSession && !currentSession()) {
    sessionStorage.setItem("court.after", location.hash);
    clear(app, accountPage());
    return;
  }
  let page: HTMLElement;
  try {
    switch (parts[0]) {
      case "account": page = accountPage(); break;
      case "lobby": page = await lobbyPage(parts[1], parts[2] ?? ""); break;
      case "join": page = await joinPage(parts[1], parts[2] ?? ""); break;
      case "game": page = await gamePage(parts[1], false); break;
      case "watch": page = await gamePage(parts[1], true); break;
      case "replay": page = await replayPage(parts[1]); break;
      case "ranking": page = await rankingPage(); break;
      case "history": page = await historyPage(); break;
      default: page = await homePage();
    }
  } catch (err) {
    page = h("main", { class: "page" }, h("p", { class: "error" }, errorText(err)));
  }
  clear(app, page);
  sessionStorage.removeItem("court.after");
}

window.addEventListener("hashchange", () => void route());
drawNav();
void refreshBalance();
void route();
