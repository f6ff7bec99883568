#!/usr/bin/env python3
"""Assembles the tokenizer test corpus tests/corpus/tokenizer_corpus.bin.zst (>= 2 MB of text).

Documents: real source code found on this machine (Python stdlib, C/C++ headers, JS/TS, Go,
Rust, HTML, the 50 chat templates of the fixtures), multilingual prose (CJK test texts from
CPython's test suite plus sentences written for this corpus in Arabic, Hindi, Russian, Greek,
Hebrew, Thai, Japanese, Korean, Chinese, Vietnamese, Turkish, German, French), emoji sequences,
whitespace runs, strings that look like special tokens, Unicode normalization edge cases and
deliberately invalid UTF-8 fragments.

Format (after zstd): repeated [u32 little-endian kind length][kind][u32 LE length][bytes].
Usage: python3 scripts/make_tokenizer_corpus.py   (deterministic: fixed seed, sorted file lists)
"""
import glob
import os
import random
import struct
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
OUT = os.path.join(ROOT, "tests", "corpus", "tokenizer_corpus.bin.zst")
FIX = os.path.join(ROOT, "..", "shared", "fixtures")
rng = random.Random(20261129)
docs = []  # (kind, bytes)


def add(kind, data):
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    if data:
        docs.append((kind, data))


def chunks(data, lo=1500, hi=6000):
    """Cuts text into document-sized pieces at line boundaries."""
    lines = data.splitlines(keepends=True)
    cur, size, target = [], 0, rng.randint(lo, hi)
    for ln in lines:
        cur.append(ln)
        size += len(ln)
        if size >= target:
            yield "".join(cur)
            cur, size, target = [], 0, rng.randint(lo, hi)
    if cur:
        yield "".join(cur)


def take_files(pattern, kind, budget, per_file=12000):
    files = sorted(glob.glob(pattern, recursive=True))
    rng.shuffle(files)
    used = 0
    for f in files:
        if used >= budget:
            break
        try:
            text = open(f, encoding="utf-8").read()
        except (UnicodeDecodeError, OSError):
            continue
        text = text[:per_file]
        for c in chunks(text):
            add(kind, c)
            used += len(c.encode())


# ---- source code -----------------------------------------------------------------------------
py = os.path.join(sys.base_prefix, "lib", "python%d.%d" % sys.version_info[:2])
take_files(py + "/*.py", "python", 300_000)
take_files(py + "/test/*.py", "python-test", 150_000)
take_files("/usr/include/**/*.h", "c", 250_000)
take_files("/usr/include/c++/12/bits/*.h", "cpp", 150_000)
take_files("/root/.rustup/toolchains/stable-*/share/doc/rust/html/**/*.js", "js", 60_000, 6000)
take_files("/root/.rustup/toolchains/stable-*/share/doc/rust/html/**/*.html", "html", 100_000, 8000)
take_files("/usr/bin/*", "shell", 40_000, 6000)
for f in sorted(glob.glob(FIX + "/chat-templates/*.jinja")):
    add("jinja", open(f, encoding="utf-8").read())

# ---- multilingual prose ------------------------------------------------------------------------
for f in sorted(glob.glob(py + "/test/cjkencodings/*-utf8.txt") +
                glob.glob("/root/.pyenv/versions/3.12.1/lib/python3.12/test/cjkencodings/*-utf8.txt")):
    try:
        add("cjk", open(f, encoding="utf-8").read())
    except UnicodeDecodeError:
        pass

SENTENCES = {
    "ar": ["مرحبا بكم في هذا الاختبار الطويل للمحلل اللغوي.",
           "تعلمت البرمجة عندما كنت في الجامعة، وكانت اللغة الأولى هي سي.",
           "الطقس اليوم جميل جداً، والسماء صافية فوق المدينة القديمة.",
           "يقرأ الأطفال القصص في المكتبة كل يوم جمعة بعد الظهر.",
           "هل يمكنك أن ترسل لي الملف قبل الساعة الخامسة مساءً؟",
           "الذكاء الاصطناعي يغير طريقة عملنا وتواصلنا مع بعضنا البعض.",
           "وُلِدَ الشَّاعِرُ فِي قَرْيَةٍ صَغِيرَةٍ عَلَى ضِفَافِ النَّهْرِ.", "١٢٣٤٥ ريال سعودي، ٦٧٨٩٠ درهم."],
    "hi": ["नमस्ते, आप कैसे हैं? मैं ठीक हूँ, धन्यवाद।",
           "भारत एक विशाल देश है जिसमें कई भाषाएँ बोली जाती हैं।",
           "कंप्यूटर विज्ञान में एल्गोरिदम का अध्ययन बहुत महत्वपूर्ण है।",
           "कल सुबह हम पहाड़ों की ओर यात्रा पर निकलेंगे।",
           "क्या आपने आज का समाचार पत्र पढ़ा? उसमें चुनाव की ख़बर है।",
           "संस्कृत में लिखा गया यह श्लोक बहुत प्राचीन है: ॐ शान्तिः शान्तिः शान्तिः॥", "१२३४५६७८९०"],
    "ru": ["Съешь же ещё этих мягких французских булок, да выпей чаю.",
           "Программирование на языке C++ требует внимания к деталям.",
           "В лесу родилась ёлочка, в лесу она росла.",
           "Москва — столица России, крупнейший город страны."],
    "el": ["Ξεσκεπάζω την ψυχοφθόρα βδελυγμία.", "Η γλώσσα μου έδωσαν ελληνική· το σπίτι φτωχικό.",
           "Ο Σωκράτης ήταν Αθηναίος φιλόσοφος.", "ΆΈΉΊΌΎΏ ΐΰ ϊϋ ᾶᾷ ῥ"],
    "he": ["שלום עולם, זהו מבחן של מנתח הטקסט.", "דג סקרן שט בים מאוכזב ולפתע מצא חברה.",
           "בְּרֵאשִׁית בָּרָא אֱלֹהִים אֵת הַשָּׁמַיִם וְאֵת הָאָרֶץ."],
    "th": ["สวัสดีครับ วันนี้อากาศดีมาก", "ภาษาไทยไม่มีการเว้นวรรคระหว่างคำ ทำให้การตัดคำเป็นเรื่องยาก",
           "เป็นมนุษย์สุดประเสริฐเลิศคุณค่า"],
    "ja": ["吾輩は猫である。名前はまだ無い。", "東京都渋谷区で新しいカフェがオープンしました！",
           "プログラミング言語のRustは安全性と速度を両立しています。", "ｶﾀｶﾅとｶﾞｷﾞｸﾞ、全角ＡＢＣ１２３。",
           "「こんにちは」と彼女は言った。"],
    "ko": ["다람쥐 헌 쳇바퀴에 타고파.", "한국어는 한글로 표기하며 세종대왕이 창제했습니다.",
           "오늘 저녁에 같이 밥 먹을래요?"],
    "zh": ["我能吞下玻璃而不伤身体。", "人工智能正在改变我们的生活方式和工作方式。",
           "北京是中华人民共和国的首都，有三千多年的历史。", "繁體中文與簡體中文的差異在於字形。",
           "他说：“明天见！”然后就走了……"],
    "vi": ["Tiếng Việt có nhiều dấu thanh: à á ả ã ạ ầ ấ ẩ ẫ ậ.", "Tôi yêu Hà Nội vào mùa thu."],
    "tr": ["Pijamalı hasta yağız şoföre çabucak güvendi.", "İstanbul'da ılık bir akşam; ŞĞÜÖÇİ ışığı."],
    "de": ["Zwölf Boxkämpfer jagen Viktor quer über den großen Sylter Deich.", "Straße, Maß, Fuß — ẞ"],
    "fr": ["Portez ce vieux whisky au juge blond qui fume.", "L'été où l'œuvre naïve fut créée, Noël était là."],
    "en": ["The quick brown fox jumps over the lazy dog.", "I'm sure they'll've done it; she'd say it's fine.",
           "Don't you DARE say it's 3:45PM already!!!", "e.g. U.S.A. vs. the U.K. -- a 50/50 split."],
}
EMOJI = ["😀", "🦙", "👩‍💻", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇫🇷", "🇯🇵", "👍🏽", "❤️", "✅", "🚀", "😶‍🌫️", "🧑🏿‍🚀",
         "©️", "#️⃣", "🫠", "🪿", "☕", "🤖", "🔥"]
for lang, sents in SENTENCES.items():
    for _ in range(40):
        parts = []
        for _ in range(rng.randint(3, 25)):
            s = rng.choice(sents)
            if rng.random() < 0.15:
                s += " " + rng.choice(EMOJI)
            parts.append(s)
            parts.append(rng.choice([" ", " ", "\n", "\n\n", "  ", "\t"]))
        add("prose-" + lang, "".join(parts))
# Mixed-language paragraphs.
all_sents = [s for v in SENTENCES.values() for s in v]
for _ in range(120):
    add("prose-mixed", " ".join(rng.choice(all_sents + EMOJI) for _ in range(rng.randint(5, 40))))

# ---- emoji, whitespace, special-token look-alikes -----------------------------------------------
for _ in range(60):
    add("emoji", "".join(rng.choice(EMOJI + [" ", "", "a", "1", "\n"]) for _ in range(rng.randint(5, 80))))
WS = [" ", "  ", "    ", "\t", "\n", "\r\n", "\r", "\u00a0", "\u3000", "\u2009", "\u200b", "\u0085",
      "\u2028", "\f", "\v", "\n\n\n", " \n ", "\t\t\t"]
for _ in range(150):
    parts = []
    for _ in range(rng.randint(3, 40)):
        r = rng.random()
        if r < 0.3:
            parts.append(rng.choice(WS) * rng.randint(1, 40))
        elif r < 0.6:
            parts.append(rng.choice(["def f():", "x = 1", "return y", "int main() {", "}", "Hello", "world",
                                     "3.14159", "12345678901234567890", "foo_bar", "CamelCase", "'s", "'ll"]))
        else:
            parts.append(rng.choice(all_sents))
    add("whitespace", "".join(parts))
add("whitespace", " " * 3000)
add("whitespace", "\n" * 500 + "x" + "\t" * 300 + " \n" * 200)
SPECIAL = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<s>", "</s>", "<unk>", "<pad>", "<bos>", "<eos>",
           "<|begin_of_text|>", "<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>", "[INST]", "[/INST]",
           "<start_of_turn>", "<end_of_turn>", "<unused12>", "<mask>", "<tool_call>", "</tool_call>",
           "<think>", "</think>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|file_sep|>",
           "<|reserved_special_token_5|>", "[multimodal]", "<0x0A>", "<|im_sta", "im_end|>", "<|", "|>",
           "< |im_start| >", "<<|im_start|>>", "<|IM_START|>", "<|im_start|><|im_start|>", "<s><s>",
           "<|python_tag|>", "<SPECIAL_10>", "[TOOL_CALLS]", "<image_soft_token>"]
for _ in range(250):
    parts = []
    for _ in range(rng.randint(2, 30)):
        r = rng.random()
        if r < 0.45:
            parts.append(rng.choice(SPECIAL))
        elif r < 0.7:
            parts.append(rng.choice(WS[:6]))
        else:
            parts.append(rng.choice(all_sents + ["user", "assistant", "system", "\nHello!", "{\"a\": 1}"]))
    add("special", "".join(parts))

# ---- Unicode edge cases ---------------------------------------------------------------------------
import unicodedata as ud
decomposable = [chr(c) for c in range(0x80, 0x30000) if ud.decomposition(chr(c))]
combining = [chr(c) for c in range(0x300, 0x370)] + [chr(c) for c in range(0x1AB0, 0x1AC0)]
for _ in range(80):
    parts = []
    for _ in range(rng.randint(10, 120)):
        r = rng.random()
        if r < 0.35:
            parts.append(rng.choice(decomposable))
        elif r < 0.55:
            parts.append(ud.normalize("NFD", rng.choice(decomposable)))
        elif r < 0.7:
            parts.append(rng.choice("aeiouAEIOUnc") + "".join(rng.choice(combining) for _ in range(rng.randint(1, 4))))
        elif r < 0.8:  # Hangul jamo sequences that compose
            parts.append(chr(0x1100 + rng.randrange(19)) + chr(0x1161 + rng.randrange(21)) +
                         (chr(0x11A8 + rng.randrange(27)) if rng.random() < 0.5 else ""))
        else:
            parts.append(rng.choice([" ", "x", "1", ".", "ß", "İ", "ſ", "K", "ﬁ", "Å", "Ω", "ǅ"]))
    add("unicode-norm", "".join(parts))
assigned = [c for c in range(0x20, 0x30000) if ud.category(chr(c)) not in ("Cn", "Cs", "Co")]
for _ in range(80):
    add("unicode-random", "".join(chr(rng.choice(assigned)) + (" " if rng.random() < 0.2 else "")
                                  for _ in range(rng.randint(20, 200))))
add("unicode-ascii", "".join(chr(c) for c in range(0, 128)) * 3)

# ---- invalid UTF-8 fragments (HF takes str: bytes are decoded with errors='replace') -------------
BAD = [b"\xff", b"\xfe", b"\xc0\xaf", b"\xe0\x80\xaf", b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xf4\x90\x80\x80",
       b"\xf5\x80", b"\xc3", b"\xe2\x82", b"\xf0\x9f\x98", b"\x80", b"\xbf\xbf", b"\xc2\x41", b"\xe2\x28\xa1",
       b"\xf0\x28\x8c\xbc", b"\xf8\x88\x80\x80\x80", b"\x00", b"\xef\xbf\xbd"]
for _ in range(120):
    parts = []
    for _ in range(rng.randint(3, 40)):
        r = rng.random()
        if r < 0.35:
            parts.append(rng.choice(BAD))
        elif r < 0.45:
            parts.append(bytes(rng.randrange(256) for _ in range(rng.randint(1, 8))))
        else:
            s = rng.choice(all_sents + EMOJI).encode()
            if rng.random() < 0.3:  # cut a multi-byte character in half
                s = s[:rng.randint(1, len(s))]
            parts.append(s)
    add("invalid-utf8", b"".join(parts))

raw = bytearray()
for kind, data in docs:
    k = kind.encode()
    raw += struct.pack("<I", len(k)) + k + struct.pack("<I", len(data)) + data
total = sum(len(d) for _, d in docs)
os.makedirs(os.path.dirname(OUT), exist_ok=True)
subprocess.run(["zstd", "-19", "-q", "-f", "-o", OUT], input=bytes(raw), check=True)
print(f"{len(docs)} documents, {total} bytes -> {OUT} ({os.path.getsize(OUT)} bytes)")
