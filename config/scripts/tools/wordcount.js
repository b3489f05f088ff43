// Counts words; the LLM gets a one-line summary, the person a table and a chart.
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
    const top = [...counts.entries()]
        .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
        .slice(0, args.top ?? 10);
    const summary = top.map(([w, n]) => `${w}: ${n}`).join(", ");
    return {
        content: `Слов: ${words.length}, разных: ${counts.size}. Чаще всего — ${summary}`,
        success: true,
        visual: [
            {
                type: "table",
                columns: [{ key: "word", title: "Слово" }, { key: "count", title: "Раз" }],
                rows: top.map(([word, count]) => ({ word, count })),
            },
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
