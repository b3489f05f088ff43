// Counts words; the LLM gets a one-line summary, the person a table and a chart.
// The table pages lazily (S6.3): with more words than `top`, it carries
// `continuation.args`, the arguments of this same tool for the next page.
function run(args, config) {
    const stop = new Set(config.stopwords ?? []);
    const words = (args.text ?? "")
        .toLowerCase()
        .split(/[^\p{L}\p{N}'-]+/u)
        .filter((w) => w.length > 0 && !stop.has(w));
    if (words.length === 0) {
        return { content: "текст пуст", success: false, error: "empty text" };
    }
    const counts = new Map();
    for (const w of words) counts.set(w, (counts.get(w) ?? 0) + 1);
    const size = args.top ?? 10;
    const offset = args.offset ?? 0;
    const ranked = [...counts.entries()].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
    const top = ranked.slice(offset, offset + size);
    const summary = top.map(([w, n]) => `${w}: ${n}`).join(", ");
    const table = {
        type: "table",
        columns: [{ key: "word", title: "Слово" }, { key: "count", title: "Раз" }],
        rows: top.map(([word, count]) => ({ word, count })),
    };
    if (offset + size < ranked.length) {
        table.continuation = { args: { text: args.text, top: size, offset: offset + size } };
    }
    if (offset > 0) {  // a next page: its rows only
        const last = offset + top.length;
        return { content: `Слова ${offset + 1}–${last} из ${counts.size}: ${summary}`, visual: table };
    }
    return {
        content: `Слов: ${words.length}, разных: ${counts.size}. Чаще всего — ${summary}`,
        success: true,
        visual: [
            table,
            {
                type: "chart",
                chart: "bar",
                title: "Частые слова",
                labels: top.map(([w]) => w),
                series: [{ name: "раз", data: top.map(([, n]) => n) }],
            },
        ],
    };
}
