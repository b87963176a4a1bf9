// Voice design for the espeak engine (DesignVoice): what espeak-ng can vary is its voice
// variant (the built-in male, female, older, whispering voices), its pitch (0-99) and its pace
// (words per minute). The description's words are mapped onto those three, and only those:
// gender, age, pitch and pace words are applied; every other word (warm, confident, narrator,
// ...) is reported as not applied in each candidate's summary. docs/inference.md, "Voice design".
//
// A designed voice's id carries its settings (`espeak-design:<variant>:<pitch>:<pace %>`), so
// it lasts by itself: SynthesizeRequest.reference_id takes it and speaks with those settings in
// any of the engine's languages.

export interface EspeakDesign {
  /** An espeak-ng voice variant (`f3`, `m7`, `grandma`, `whisper`, ...). */
  variant: string;
  /** espeak's pitch, 0 to 99 (50 is its default). */
  pitch: number;
  /** Pace in percent of the engine's normal rate (50 to 300). */
  pace: number;
}

export interface Traits {
  gender?: 'female' | 'male';
  age?: 'child' | 'young' | 'middle' | 'old';
  pitch?: 'high' | 'low';
  pace?: 'fast' | 'slow';
  whisper: boolean;
  /** The description's words that set a trait, as written. */
  applied: string[];
  /** Words that describe something espeak cannot vary. */
  ignored: string[];
}

export const DESIGN_PREFIX = 'espeak-design:';

/** Variants with their gender, and the pools candidates are drawn from. */
const FEMALE = { child: ['f5', 'f4'], young: ['f4', 'f2', 'f5'], adult: ['f3', 'f2', 'f4', 'f5'], middle: ['f1', 'f3'], old: ['grandma', 'f1'] };
const MALE = { child: ['m3', 'm6'], young: ['m3', 'm2', 'm6'], adult: ['m2', 'm3', 'm4', 'm5', 'm6', 'm7'], middle: ['m8', 'm1'], old: ['grandpa', 'croak', 'm1'] };
const WHISPER = { female: ['whisperf'], male: ['whisper'] };
const VARIANTS = new Set([...Object.values(FEMALE).flat(), ...Object.values(MALE).flat(), ...WHISPER.female, ...WHISPER.male]);
const FEMALE_VARIANTS = new Set([...Object.values(FEMALE).flat(), ...WHISPER.female]);

const WORDS: [RegExp, (t: Traits) => void][] = [
  [/^(female|woman|women|girl|girls|lady|feminine|she|her|mother|mom|aunt|grandmother|granny|grandma)$/, (t) => (t.gender ??= 'female')],
  [/^(male|man|men|boy|boys|guy|masculine|he|his|father|dad|uncle|grandfather|grandpa|gentleman)$/, (t) => (t.gender ??= 'male')],
  [/^(child|children|kid|kids|little|toddler|childlike)$/, (t) => (t.age ??= 'child')],
  [/^(young|youthful|teen|teenage|teenager|student)$/, (t) => (t.age ??= 'young')],
  [/^(middle-aged|mature|adult)$/, (t) => (t.age ??= 'middle')],
  [/^(old|older|elderly|aged|senior|ancient|grandfather|grandmother|grandpa|grandma|granny)$/, (t) => (t.age ??= 'old')],
  [/^(high|high-pitched|higher|squeaky|shrill)$/, (t) => (t.pitch ??= 'high')],
  [/^(low|low-pitched|lower|deep|deeper|bass|baritone|husky|gravelly|booming)$/, (t) => (t.pitch ??= 'low')],
  [/^(fast|faster|quick|quickly|rapid|brisk|energetic|excited|hurried|lively|upbeat)$/, (t) => (t.pace ??= 'fast')],
  [/^(slow|slower|slowly|calm|relaxed|measured|deliberate|soothing|sleepy|unhurried)$/, (t) => (t.pace ??= 'slow')],
  [/^(whisper|whispers|whispering|whispered|breathy|hushed)$/, (t) => (t.whisper = true)],
];

/** Words that carry no trait of a voice (neither applied nor worth reporting). */
const FILLER = new Set([
  'a', 'an', 'the', 'and', 'or', 'with', 'of', 'in', 'on', 'for', 'to', 'at', 'by', 'is', 'that', 'this', 'as', 'but', 'very', 'quite',
  'slightly', 'bit', 'voice', 'voiced', 'sounding', 'sounds', 'speaker', 'speaking', 'speaks', 'talks', 'who', 'like', 'tone', 'pitched',
  'paced', 'pace', 'pitch', 'speech', 'someone', 'person', 'somewhat', 'rather', 'really', 'more', 'less', 'not', 'too',
]);

/** The traits a description asks for, by its words (English). */
export function traitsOf(description: string): Traits {
  const t: Traits = { whisper: false, applied: [], ignored: [] };
  const words = description.toLowerCase().match(/[\p{L}\p{N}]+(?:-[\p{L}\p{N}]+)*/gu) ?? [];
  for (const w of words) {
    // A word may set two traits ("grandmother": female and old).
    const rules = WORDS.filter(([re]) => re.test(w));
    if (rules.length) {
      for (const [, apply] of rules) apply(t);
      if (!t.applied.includes(w)) t.applied.push(w);
    } else if (!FILLER.has(w) && !/^\d+$/.test(w) && !t.ignored.includes(w)) {
      t.ignored.push(w);
    }
  }
  return t;
}

/** A small seeded PRNG (mulberry32): the same seed gives the same candidates. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = a;
    x = Math.imul(x ^ (x >>> 15), x | 1);
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61);
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

const clamp = (v: number, lo: number, hi: number) => Math.min(hi, Math.max(lo, v));

function shuffled<T>(list: T[], rnd: () => number): T[] {
  const a = [...list];
  for (let i = a.length - 1; i > 0; i--) {
    const j = Math.floor(rnd() * (i + 1));
    [a[i], a[j]] = [a[j]!, a[i]!];
  }
  return a;
}

/**
 * `count` distinct designs for a description: variants drawn from the pools its gender, age and
 * whisper words select (alternating female and male when it names no gender), pitch and pace
 * moved by its age, pitch and pace words, each with a small seeded variation.
 */
export function designsFor(description: string, count: number, speed: number, seed: number): { design: EspeakDesign; traits: Traits }[] {
  const traits = traitsOf(description);
  const rnd = prng(seed);
  const age = traits.age ?? 'adult';
  const pool = (g: 'female' | 'male') => (traits.whisper ? WHISPER[g] : (g === 'female' ? FEMALE : MALE)[age]);
  const genders: ('female' | 'male')[] = traits.gender ? [traits.gender] : rnd() < 0.5 ? ['female', 'male'] : ['male', 'female'];
  const pools = genders.map((g) => shuffled(pool(g), rnd));
  let pitch = 50 + ({ child: 28, young: 10, adult: 0, middle: -5, old: -10 } as const)[age];
  if (traits.pitch === 'high') pitch += 15;
  if (traits.pitch === 'low') pitch -= 15;
  let pace = 100 * (traits.pace === 'fast' ? 1.25 : traits.pace === 'slow' ? 0.8 : 1) * (age === 'old' ? 0.9 : age === 'child' ? 1.05 : 1) * (speed || 1);
  pace = clamp(pace, 50, 300);
  const out: { design: EspeakDesign; traits: Traits }[] = [];
  const seen = new Set<string>();
  for (let i = 0; out.length < count && i < count * 8; i++) {
    const p = pools[i % pools.length]!;
    const variant = p[Math.floor(i / pools.length) % p.length]!;
    // The same variant again (a small pool) differs by pitch: a step to either side.
    const repeat = Math.floor(i / pools.length / p.length);
    const design = {
      variant,
      pitch: Math.round(clamp(pitch + (rnd() - 0.5) * 10 + repeat * (repeat % 2 ? 8 : -8), 5, 95)),
      pace: Math.round(clamp(pace * (1 + (rnd() - 0.5) * 0.08), 50, 300)),
    };
    const id = designId(design);
    if (seen.has(id)) continue;
    seen.add(id);
    out.push({ design, traits });
  }
  return out;
}

export function designId(d: EspeakDesign): string {
  return `${DESIGN_PREFIX}${d.variant}:${d.pitch}:${d.pace}`;
}

/** The settings of a designed voice id, or null when it is not one this engine made. */
export function parseDesignId(id: string): EspeakDesign | null {
  const m = /^espeak-design:([a-z0-9]+):(\d{1,2}):(\d{2,3})$/.exec(id);
  if (!m || !VARIANTS.has(m[1]!)) return null;
  const pitch = Number(m[2]);
  const pace = Number(m[3]);
  if (pace < 50 || pace > 300) return null;
  return { variant: m[1]!, pitch, pace };
}

/** What a candidate is, in words: the settings chosen and the words espeak cannot apply. */
export function summaryOf(d: EspeakDesign, traits: Traits, wordsPerMinute: number): string {
  const gender = FEMALE_VARIANTS.has(d.variant) ? 'female' : 'male';
  const parts = [`espeak-ng voice variant ${d.variant} (${gender}${d.variant.startsWith('whisper') ? ', whispering' : ''}), pitch ${d.pitch} of 99, pace ${(d.pace / 100).toFixed(2)}× (${wordsPerMinute} words per minute)`];
  parts.push(traits.applied.length ? `Applied: ${traits.applied.join(', ')}` : 'No gender, age, pitch or pace words: varied freely');
  if (traits.ignored.length) parts.push(`Not applied (espeak varies only voice variant, pitch and pace): ${traits.ignored.slice(0, 12).join(', ')}${traits.ignored.length > 12 ? ', …' : ''}`);
  return `${parts.join('. ')}.`;
}

/** What the previews say when the request gives no text, by language. */
export const PREVIEW_TEXTS: Record<string, string> = {
  en: 'Hello! This is how I sound. I can read your messages, answer questions and help your callers.',
  es: '¡Hola! Así suena mi voz. Puedo leer tus mensajes, responder preguntas y ayudar a tus clientes.',
  fr: 'Bonjour ! Voici ma voix. Je peux lire vos messages, répondre aux questions et aider vos clients.',
  de: 'Hallo! So klingt meine Stimme. Ich kann Nachrichten vorlesen, Fragen beantworten und Ihren Kunden helfen.',
  ja: 'こんにちは。これが私の声です。メッセージを読み上げたり、質問に答えたりできます。',
  zh: '你好！这是我的声音。我可以朗读消息，回答问题，帮助你的客户。',
  ko: '안녕하세요! 제 목소리는 이렇습니다. 메시지를 읽고 질문에 답할 수 있습니다.',
};
