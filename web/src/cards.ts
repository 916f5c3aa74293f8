// Cards drawn with CSS: every card has an accessible name ("Queen of hearts").
import { h } from "./dom.js";

const RANKS: Record<string, string> = {
  A: "Ace", K: "King", Q: "Queen", J: "Jack", T: "10",
  "9": "9", "8": "8", "7": "7", "6": "6", "5": "5", "4": "4", "3": "3", "2": "2",
};
const SUITS: Record<string, [string, string]> = {
  H: ["hearts", "♥"], D: ["diamonds", "♦"], S: ["spades", "♠"], C: ["clubs", "♣"],
};

export function cardName(code: string | undefined | null): string {
  if (!code) return "a hidden card";
  if (code === "GL") return "the glove";
  if (code === "RJ") return "Red joker";
  if (code === "BJ") return "Black joker";
  const rank = RANKS[code[0]];
  const suit = SUITS[code[1]];
  return rank && suit ? `${rank} of ${suit[0]}` : code;
}

// A short form for sentences: "Q♥", "10♠".
export function cardShort(code: string | undefined | null): string {
  if (!code) return "?";
  if (code === "GL") return "glove";
  if (code === "RJ" || code === "BJ") return code === "RJ" ? "red joker" : "black joker";
  const suit = SUITS[code[1]];
  return suit ? (code[0] === "T" ? "10" : code[0]) + suit[1] : code;
}

function face(code: string): HTMLElement[] {
  if (code === "GL") return [h("span", { class: "c-glove", "aria-hidden": "true" }, "✋"), h("span", { class: "c-mid" }, "glove")];
  if (code === "RJ" || code === "BJ")
    return [h("span", { class: "c-rank" }, "★"), h("span", { class: "c-mid" }, "Joker")];
  const suit = SUITS[code[1]]?.[1] ?? "?";
  const rank = code[0] === "T" ? "10" : code[0];
  return [
    h("span", { class: "c-rank" }, rank, h("br"), suit),
    h("span", { class: "c-mid" }, suit),
  ];
}

function colour(code: string): string {
  return code[1] === "H" || code[1] === "D" || code === "RJ" ? "red" : code === "GL" ? "glove" : "black";
}

// A card to look at (role img), or face down when code is empty.
export function card(code: string | null | undefined, extra = ""): HTMLElement {
  if (!code) return h("span", { class: `card back ${extra}`, role: "img", "aria-label": "a face-down card" });
  return h("span", { class: `card ${colour(code)} ${extra}`, role: "img", "aria-label": cardName(code), "data-card": code }, ...face(code));
}

// A card to press: a button named by the card (and what pressing does, when given).
export function cardButton(code: string, label: string, onClick: () => void, pressed?: boolean): HTMLElement {
  const b = h(
    "button",
    { class: `card ${colour(code)}`, "aria-label": label, "data-card": code, "data-legal": "", onclick: onClick as EventListener },
    ...face(code),
  );
  if (pressed !== undefined) b.setAttribute("aria-pressed", String(pressed));
  return b;
}

export function backs(n: number): HTMLElement {
  const el = h("span", { class: "backs", role: "img", "aria-label": `${n} card${n === 1 ? "" : "s"} face down` });
  for (let i = 0; i < Math.min(n, 13); i++) el.append(h("span", { class: "card back mini", "aria-hidden": "true" }));
  return el;
}

export function cardRow(cards: readonly string[], cls = ""): HTMLElement {
  return h("span", { class: `cards ${cls}` }, ...cards.map((c) => card(c)));
}
