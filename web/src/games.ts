// The four games' tables, actions and events in words, drawn from what the viewer receives: a
// GameView (its legal actions included) and the events of each move. Nothing here decides what is
// legal: only the view's legal actions are offered.
import { toJsonString } from "@bufbuild/protobuf";
import type { Event } from "./gen/court/games/v1/events_pb.js";
import { type Action, ActionSchema } from "./gen/court/rules/v1/actions_pb.js";
import type { GameView } from "./gen/court/rules/v1/rules_pb.js";
import { backs, card, cardButton, cardRow, cardShort } from "./cards.js";
import { h } from "./dom.js";

export const TITLES: Record<string, string> = {
  queens_court: "Queen's Court",
  hearts: "Hearts",
  the_court: "The Court",
  court_wars: "Court Wars",
};
const BOT_NAMES = ["Blue Otter", "Yellow Bird", "Red Fox", "Green Newt", "Grey Heron", "Pink Crab"];

export class Names {
  readonly names: string[];
  constructor(
    readonly seats: readonly string[],
    accounts: ReadonlyMap<string, string>,
    readonly you?: number,
  ) {
    let bots = 0;
    this.names = seats.map((pid) =>
      pid.startsWith("bot:") ? `${BOT_NAMES[bots++ % BOT_NAMES.length]} (bot)` : (accounts.get(pid) ?? pid.slice(0, 8)),
    );
  }
  short(seat: number | undefined): string {
    if (seat === undefined || seat < 0 || seat >= this.names.length) return `seat ${seat}`;
    return seat === this.you ? "you" : this.names[seat];
  }
  full(seat: number): string {
    return (this.names[seat] ?? `seat ${seat}`) + (seat === this.you ? " (you)" : "");
  }
  owner(seat: number | undefined): string {
    return seat === this.you ? "your" : `${this.short(seat)}'s`;
  }
  verb(seat: number | undefined, plain: string, third: string): string {
    return seat === this.you ? `you ${plain}` : `${this.short(seat)} ${third}`;
  }
}

export function actionKey(a: Action | undefined): string {
  return a ? toJsonString(ActionSchema, a) : "";
}

const cap = (s: string) => s.charAt(0).toUpperCase() + s.slice(1);

// ------------------------------------------------------------------------------- actions in words

export function describeAction(a: Action, names: Names): string {
  const g = a.game;
  switch (g.case) {
    case "queensCourt": {
      const p = g.value.kind.value;
      if (!p) break;
      const what = p.card === "GL" ? "the glove" : cardShort(p.card);
      return `Play ${what} on ${names.owner(p.target)} ${p.pile === 1 ? "left" : "right"} pile`;
    }
    case "hearts": {
      const k = g.value.kind;
      if (k.case === "play") return `Play ${cardShort(k.value.card)}`;
      if (k.case === "passCard") return `Pass ${cardShort(k.value.card)}`;
      if (k.case === "pass") return `Pass ${k.value.cards.map(cardShort).join(" ")}`;
      break;
    }
    case "theCourt": {
      const k = g.value.kind;
      switch (k.case) {
        case "place": return `Place on tower ${k.value.tower + 1}`;
        case "newTower": return "Start a new tower";
        case "bank": return "Bank it in the Moat";
        case "discard": return "Discard it";
        case "offer": return "Offer it to your partner";
        case "accept": return "Accept the card";
        case "decline": return "Decline the card";
        case "swap": return k.value.agree ? "Agree to swap" : "Refuse the swap";
        case "burn": return "Burn it";
        case "keep": return "Keep it";
        case "draw": return `Draw from the ${k.value.source === 2 ? "pile" : "deck"}`;
      }
      break;
    }
    case "courtWars": {
      const k = g.value.kind;
      switch (k.case) {
        case "setupPlace": return `Guard the ${k.value.court} court`;
        case "setupDiscard": return "Discard it (setup)";
        case "defend": return "Defend (draw)";
        case "place": return `Place it on the ${k.value.court} court`;
        case "revive": return `Revive the ${k.value.court} court`;
        case "discard": return "Discard it";
        case "skipAttack": return "Skip the attack";
        case "pass": return "Pass";
        case "attack": {
          const v = k.value;
          const rm = v.remove.case === "defeat" ? "defeat it" : `remove ${v.remove.value} guard${v.remove.value === 1 ? "" : "s"}`;
          return `Attack ${names.owner(v.target)} ${v.targetCourt} from your ${v.court}, spending ${v.spend}: ${rm}`;
        }
      }
      break;
    }
  }
  return actionKey(a);
}

// ------------------------------------------------------------------------------- events in words

/* eslint-disable @typescript-eslint/no-explicit-any */
export function describeEvent(ev: Event, names: Names): string | null {
  const k = ev.kind;
  if (!k.case) return null;
  const e = k.value as any;
  const who = cap(names.short(e.seat ?? e.player));
  const c = cardShort;
  switch (k.case) {
    case "turnStarted": return null;
    case "gameEnded": return null; // each game says it in its own words
    case "turnTimedOut": return `${cap(names.owner(e.seat))} time ran out: the bot played the turn`;
    case "seatAway": return `${cap(names.verb(e.seat, "are", "is"))} away: the bot plays the seat`;
    case "seatReturned": return `${cap(names.verb(e.seat, "are", "is"))} back in the seat`;
    // Queen's Court
    case "queensCourtRoundDealt": return `Round ${e.round + 1} dealt`;
    case "queensCourtHandDealt": return null;
    case "queensCourtCardPlayed":
      return `${who} played ${e.glove ? "the glove" : c(e.card)} on ${names.owner(e.target)} ${e.pile} pile` +
        (e.zeroByQueen ? " (spread 0 by a queen)" : "");
    case "queensCourtCardsDrawn": return e.count ? `${who} drew ${e.count}` : null;
    case "queensCourtSecondHalfStarted": return "The deck is empty: second half, gloves out";
    case "queensCourtPileLocked": return `${cap(names.owner(e.player))} piles are locked`;
    case "queensCourtRoundEnded":
      return `Round ${e.round + 1} over: ${e.gained.map((s: number) => names.short(s)).join(", ") || "nobody"} gained a round win`;
    case "queensCourtGameEnded": return `Game over: ${names.verb(e.winner, "win", "wins")}`;
    // Hearts
    case "heartsHandDealt": return null;
    case "heartsPassCardsChosen": return e.ready ? `${who} chose the cards to pass` : null;
    case "heartsCardsPassed": return e.secret?.cards?.length ? `You received ${e.secret.cards.map(c).join(" ")} from ${names.short(e.seat)}` : null;
    case "heartsPlayStarted": return `${who} lead${e.seat === names.you ? "" : "s"} with 2♣`;
    case "heartsCardPlayed": return `${who} played ${c(e.card)}`;
    case "heartsHeartsBroken": return "Hearts are broken";
    case "heartsTrickTaken": return `${who} took the trick${e.points ? ` (${e.points} point${e.points === 1 ? "" : "s"})` : ""}`;
    case "heartsHandEnded":
      return `Hand ${e.hand + 1} over${e.moon !== undefined ? `: ${names.short(e.moon)} shot the moon` : ""}. Totals ${e.totals.join(" · ")}`;
    case "heartsGameEnded": return `Game over: ${e.winners.map((s: number) => names.short(s)).join(", ")} won`;
    // The Court
    case "theCourtCardDrawn": return `${who} drew ${e.card ? c(e.card) : e.secret?.card ? c(e.secret.card) : "a card"}`;
    case "theCourtTowerStarted": return `${who} started tower ${e.tower + 1} with ${c(e.card)}`;
    case "theCourtCardPlaced": return `${who} placed ${c(e.card)} on tower ${e.tower + 1} (value ${e.value})${e.frozen ? ", frozen" : ""}`;
    case "theCourtTowerClosed": return `${who} closed tower ${e.tower + 1}: ${e.points >= 0 ? "+" : ""}${e.points} (score ${e.score})`;
    case "theCourtTowerSwept": return `${who} swept tower ${e.tower + 1}: ${e.points >= 0 ? "+" : ""}${e.points} (score ${e.score})`;
    case "theCourtMoatBanked": return `${who} banked a card in the Moat`;
    case "theCourtMoatDeployed": return `${cap(names.owner(e.seat))} Moat deployed ${c(e.card)}`;
    case "theCourtMoatSealed": return `${cap(names.owner(e.seat))} Moat is sealed`;
    case "theCourtCardDiscarded": return `${who} discarded ${c(e.card)}`;
    case "theCourtCardOffered": return `${who} offered a card to ${names.short(e.to)}`;
    case "theCourtCardAccepted": return `${who} accepted the card`;
    case "theCourtCardDeclined": return `${who} declined the card`;
    case "theCourtCardKept": return `${who} kept the card`;
    case "theCourtCardBurned": return `${who} burned ${c(e.card)}`;
    case "theCourtCardsSwapped": return "Both agreed: the cards swap";
    case "theCourtSwapVetoed": return "No swap";
    case "theCourtPlayerFinished": return `${who} finished: score ${e.score}`;
    case "theCourtGameEnded":
      return `Game over: score${e.scores.length > 1 ? "s" : ""} ${e.scores.join(" · ")}${e.won === undefined ? "" : e.won ? ", target beaten!" : ", target missed"}`;
    // Court Wars
    case "courtWarsSetupCardDrawn": return `${who} drew ${c(e.card)} in setup`;
    case "courtWarsGuardPlaced": return `${who} placed ${c(e.card)} on the ${e.court} court (attack ${e.attack}, defence ${e.defence})`;
    case "courtWarsSetupEnded": return "Setup done: the war begins";
    case "courtWarsCardDrawn": return `${who} drew ${c(e.card)}`;
    case "courtWarsCardDiscarded": return `${who} discarded ${e.cards.map(c).join(" ")}`;
    case "courtWarsCourtAttacked":
      return `${who} attacked ${names.owner(e.target)} ${e.targetCourt} with strength ${e.strength}${e.defeated ? ": defeated!" : ""}`;
    case "courtWarsCourtRevived": return `${who} revived the ${e.court} court`;
    case "courtWarsPlayerOut": return `${cap(names.verb(e.player, "are", "is"))} out`;
    case "courtWarsAttackSkipped": return `${who} skipped the attack`;
    case "courtWarsTurnPassed": return `${who} passed`;
    case "courtWarsGameEnded":
      return `Game over after ${e.turns} turns: ${e.winners.map((s: number) => names.short(s)).join(", ") || "nobody"} won`;
  }
  return null;
}

// ------------------------------------------------------------------------------- the tables

export interface TableUI {
  names: Names;
  legal: Action[]; // the viewer's legal actions now (empty when not to act)
  busy: boolean;
  hint: string; // actionKey of the bot's suggestion, or ""
  selected: string; // Queen's Court: the card chosen to play
  select(card: string): void;
  submit(a: Action): void;
  clock(seat: number): HTMLElement | null; // the seat's countdown / away mark
}

function seatHead(gv: GameView, ui: TableUI, seat: number, extra: (Node | string)[] = []): HTMLElement {
  const acting = gv.toAct.includes(seat);
  return h(
    "div",
    { class: `seat-head${acting ? " acting" : ""}`, "data-seat": seat },
    h("span", { class: "who" }, acting ? "▶ " : "", ui.names.full(seat)),
    ui.clock(seat),
    ...extra,
  );
}

function moveButton(a: Action, ui: TableUI, label?: string): HTMLElement {
  const text = label ?? describeAction(a, ui.names);
  const hint = actionKey(a) === ui.hint;
  return h(
    "button",
    { class: `move${hint ? " hint" : ""}`, "data-move": "", disabled: ui.busy, onclick: (() => ui.submit(a)) as EventListener },
    text + (hint ? "  ← bot's hint" : ""),
  );
}

export function actionList(actions: Action[], ui: TableUI): HTMLElement {
  return h("div", { class: "actions", role: "group", "aria-label": "Your moves" }, ...actions.map((a) => moveButton(a, ui)));
}

function queensCourt(gv: GameView, ui: TableUI): HTMLElement {
  const v = gv.view?.game.case === "queensCourt" ? gv.view.game.value : undefined;
  if (!v) return h("div");
  const plays = ui.legal.flatMap((a) =>
    a.game.case === "queensCourt" && a.game.value.kind.case === "play" ? [{ a, p: a.game.value.kind.value }] : [],
  );
  const playable = [...new Set(plays.map((x) => x.p.card))];
  let sel = ui.selected;
  if (!playable.includes(sel)) sel = playable[0] ?? "";
  const seats = v.table.map((row) => {
    const piles = (["left", "right"] as const).map((side, i) => {
      const p = row[side];
      const move = plays.find((x) => x.p.card === sel && x.p.target === row.seat && x.p.pile === i + 1);
      const label = `${cap(ui.names.owner(row.seat))} ${side} pile: ${p?.showing ? cardShort(p.showing) : "empty"}, ${p?.count ?? 0} card${p?.count === 1 ? "" : "s"}${p?.gloved ? ", gloved" : ""}`;
      const body = [
        p?.showing ? card(p.showing) : h("span", { class: "card empty", "aria-hidden": "true" }),
        p?.gloved ? h("span", { class: "badge glove" }, "gloved") : null,
        h("span", { class: "count" }, `${p?.count ?? 0}`),
      ];
      if (move) {
        const hint = actionKey(move.a) === ui.hint;
        return h(
          "button",
          {
            class: `pile target${hint ? " hint" : ""}`,
            "data-move": "",
            disabled: ui.busy,
            "aria-label": `${describeAction(move.a, ui.names)} (${label})`,
            onclick: (() => ui.submit(move.a)) as EventListener,
          },
          ...body,
        );
      }
      return h("div", { class: "pile", role: "group", "aria-label": label }, ...body);
    });
    const spread = row.doubleQueen ? "double queen" : `spread ${row.spread ?? "–"}`;
    return h(
      "section",
      { class: `qc-seat${row.seat === gv.yourSeat ? " mine" : ""}`, "aria-label": ui.names.full(row.seat) },
      seatHead(gv, ui, row.seat, [
        h("span", { class: "meta" }, `${spread} · piles ${row.pileCount} · rounds won ${v.roundWins[row.seat] ?? 0}${row.locked ? " · locked" : ""}`),
      ]),
      h("div", { class: "piles" }, ...piles),
      row.seat === gv.yourSeat ? null : h("div", { class: "hand-size" }, backs(row.handSize), row.holdsGlove ? h("span", { class: "badge glove" }, "holds the glove") : null),
    );
  });
  const hand = v.hand?.cards ?? [];
  const mine = gv.yourSeat !== undefined ? v.table[gv.yourSeat] : undefined;
  const handCards = [...hand, ...(mine?.holdsGlove && !hand.includes("GL") ? ["GL"] : [])];
  return h(
    "div",
    { class: "table qc" },
    h("p", { class: "status" }, `Round ${v.round + 1} · ${v.phase.replace("_", " ")} · deck ${v.deckSize}`),
    h("div", { class: "qc-seats" }, ...seats),
    gv.yourSeat === undefined
      ? null
      : h(
          "div",
          { class: "hand", role: "group", "aria-label": "Your hand" },
          ...handCards.map((c) =>
            playable.includes(c)
              ? cardButton(c, `${c === "GL" ? "The glove" : cardShort(c)}: choose to play`, () => ui.select(c), c === sel)
              : card(c, playable.length ? "idle" : ""),
          ),
          playable.length ? h("p", { class: "tip" }, `Chosen: ${sel === "GL" ? "the glove" : cardShort(sel)} — press a highlighted pile to play it.`) : null,
        ),
  );
}

function hearts(gv: GameView, ui: TableUI): HTMLElement {
  const v = gv.view?.game.case === "hearts" ? gv.view.game.value : undefined;
  if (!v) return h("div");
  const me = gv.yourSeat ?? 0;
  const byCard = new Map<string, Action>();
  for (const a of ui.legal)
    if (a.game.case === "hearts" && (a.game.value.kind.case === "play" || a.game.value.kind.case === "passCard"))
      byCard.set(a.game.value.kind.value.card, a);
  const place = ["south", "west", "north", "east"];
  const seats = [0, 1, 2, 3].map((s) => {
    const pos = place[(s - me + 4) % 4];
    return h(
      "section",
      { class: `h-seat ${pos}${s === gv.yourSeat ? " mine" : ""}`, "aria-label": ui.names.full(s) },
      seatHead(gv, ui, s),
      h("span", { class: "meta" }, `total ${v.totals[s] ?? 0} · this hand ${v.taken[s] ?? 0} · tricks ${v.tricksWon[s] ?? 0}${v.phase === "pass" && v.ready[s] ? " · passed" : ""}`),
      s === gv.yourSeat ? null : backs(v.handSizes[s] ?? 0),
    );
  });
  const trick = v.trick?.cards.length ? v.trick : undefined;
  const last = v.tricks[v.tricks.length - 1];
  const centre = h(
    "div",
    { class: "trick", role: "group", "aria-label": trick ? "The trick" : "The last trick" },
    ...(trick
      ? trick.cards.map((c, i) => h("span", { class: `t-${place[(trick.leader + i - me + 8) % 4]}` }, card(c)))
      : last
        ? [h("span", { class: "tip" }, `Last trick to ${ui.names.short(last.winner)}:`), cardRow(last.cards, "small")]
        : [h("span", { class: "tip" }, v.phase === "pass" ? `Pass three cards ${v.pass}` : "")]),
  );
  const cards = v.cards?.cards ?? [];
  const verb = v.phase === "pass" ? "Pass" : "Play";
  return h(
    "div",
    { class: "table hearts" },
    h("p", { class: "status" }, `Hand ${v.hand + 1} · ${v.phase === "pass" ? `passing ${v.pass}` : v.phase}${v.heartsBroken ? " · hearts broken" : ""} · game to ${v.limit}`),
    h("div", { class: "h-ring" }, ...seats, centre),
    gv.yourSeat === undefined
      ? null
      : h(
          "div",
          { class: "hand", role: "group", "aria-label": "Your hand" },
          ...cards.map((c) => {
            const a = byCard.get(c);
            if (!a) return card(c, v.chosen?.cards.includes(c) ? "chosen" : byCard.size ? "idle" : "");
            const b = cardButton(c, `${verb} ${cardShort(c)}`, () => ui.submit(a));
            b.setAttribute("data-move", "");
            if (ui.busy) b.setAttribute("disabled", "");
            if (actionKey(a) === ui.hint) b.classList.add("hint");
            return b;
          }),
        ),
    v.chosen?.cards.length ? h("p", { class: "tip" }, "Chosen to pass: ", cardRow(v.chosen.cards, "small")) : null,
    v.received?.cards.length ? h("p", { class: "tip" }, `Received from ${ui.names.short(v.received.from)}: `, cardRow(v.received.cards, "small")) : null,
  );
}

function theCourt(gv: GameView, ui: TableUI): HTMLElement {
  const v = gv.view?.game.case === "theCourt" ? gv.view.game.value : undefined;
  if (!v) return h("div");
  const players = v.players.map((p) =>
    h(
      "section",
      { class: `tc-seat${p.seat === gv.yourSeat ? " mine" : ""}`, "aria-label": ui.names.full(p.seat) },
      seatHead(gv, ui, p.seat, [
        h("span", { class: "meta" }, `${p.colour} · score ${p.score}${p.deckSize !== undefined ? ` · deck ${p.deckSize}` : ""}${p.finished ? " · finished" : ""}`),
      ]),
      h(
        "div",
        { class: "towers" },
        ...(p.towers.length
          ? p.towers.map((t, i) =>
              h("div", { class: `tower${t.frozen ? " frozen" : ""}`, role: "group", "aria-label": `Tower ${i + 1}, value ${t.value}${t.frozen ? ", frozen" : ""}` },
                h("span", { class: "label" }, `${i + 1}: ${t.value}${t.frozen ? " ❄" : ""}`), cardRow(t.cards, "stack")),
            )
          : [h("span", { class: "tip" }, "no open towers")]),
      ),
      p.moat
        ? h("div", { class: "moat" }, `Moat${p.moat.sealed ? " (sealed)" : ""}: `, p.moat.count === 0 ? "empty" : p.moat.cards ? cardRow(p.moat.cards.cards, "small") : backs(p.moat.count))
        : null,
      p.closed.length ? h("div", { class: "meta" }, `closed towers: ${p.closed.map((c) => (c.points >= 0 ? "+" : "") + c.points).join(" ")}`) : null,
    ),
  );
  return h(
    "div",
    { class: "table tc" },
    h("p", { class: "status" }, `${v.mode.replace("_", " ")}${v.target !== undefined ? ` · target ${v.target}` : ""} · ${v.phase.replace("_", " ")}${v.deckSize !== undefined ? ` · deck ${v.deckSize}` : ""}`),
    v.pending.length
      ? h("div", { class: "pending" }, ...v.pending.map((p) => h("span", null, `Drawn (${ui.names.short(p.holder)}): `, card(p.card))))
      : null,
    v.pileTop?.value ? h("div", { class: "pending" }, "Pile top: ", card(v.pileTop.value)) : null,
    ...players,
  );
}

function courtWars(gv: GameView, ui: TableUI): HTMLElement {
  const v = gv.view?.game.case === "courtWars" ? gv.view.game.value : undefined;
  if (!v) return h("div");
  const players = v.players.map((p) =>
    h(
      "section",
      { class: `cw-seat${p.seat === gv.yourSeat ? " mine" : ""}${p.out ? " out" : ""}`, "aria-label": ui.names.full(p.seat) },
      seatHead(gv, ui, p.seat, [h("span", { class: "meta" }, p.out ? "out" : `${p.standing} standing · defence ${p.totalDefence}`)]),
      h(
        "div",
        { class: "courts" },
        ...p.courts.map((c) =>
          h(
            "div",
            { class: `court${c.standing ? "" : " defeated"}`, role: "group", "aria-label": `${c.court} court${c.standing ? `, attack ${c.attack}, defence ${c.defence}` : ", defeated"}` },
            h("span", { class: "label" }, c.standing ? `${c.court}: att ${c.attack} · def ${c.defence}` : `${c.court} defeated`),
            card(c.card, c.standing ? "" : "down"),
            c.joker ? card(c.joker, "small") : null,
            cardRow(c.guards, "small stack"),
          ),
        ),
      ),
    ),
  );
  const phase = v.setupPick ? `setup, pick ${v.setupPick.pick + 1} of ${v.setupPick.of}` : `${v.phase} phase`;
  return h(
    "div",
    { class: "table cw" },
    h("p", { class: "status" }, `${phase} · turn ${v.turns}/${v.turnLimit} · draw ${v.drawSize} · discard ${v.discardSize}`),
    h("div", { class: "pending" }, v.pending ? ["Drawn: ", card(v.pending)] : null, v.discardTop ? [" Discard top: ", card(v.discardTop, "small")] : null),
    ...players,
  );
}

const TABLES: Record<string, (gv: GameView, ui: TableUI) => HTMLElement> = {
  queens_court: queensCourt,
  hearts,
  the_court: theCourt,
  court_wars: courtWars,
};

// The table, and the moves not drawn on it (every move of The Court and Court Wars) as buttons.
export function renderTable(gv: GameView, ui: TableUI): HTMLElement {
  const draw = TABLES[gv.game];
  const table = draw ? draw(gv, ui) : h("p", null, `unknown game ${gv.game}`);
  const onTable = gv.game === "queens_court" || gv.game === "hearts";
  return h("div", null, table, !onTable && ui.legal.length ? actionList(ui.legal, ui) : null);
}

// The score line of a finished or running game.
export function scoreText(gv: GameView, names: Names): string {
  const r = gv.result?.result?.game;
  if (gv.result?.closedReason) return `Closed: ${gv.result.closedReason}`;
  if (!r) return "";
  const all = (xs: readonly (number | bigint)[]) => xs.map((x, i) => `${names.short(i)} ${x}`).join(" · ");
  switch (r.case) {
    case "queensCourt": return `Round wins: ${all(r.value.roundWins)}`;
    case "hearts": return `Totals: ${all(r.value.totals)}`;
    case "theCourt": return `Score${r.value.scores.length > 1 ? "s" : ""}: ${all(r.value.scores)}${r.value.target !== undefined ? ` (target ${r.value.target})` : ""}`;
    case "courtWars": return `Courts standing: ${r.value.standing.map((s, i) => `${names.short(i)} ${s.values.join("") || "none"}`).join(" · ")}`;
  }
  return "";
}
