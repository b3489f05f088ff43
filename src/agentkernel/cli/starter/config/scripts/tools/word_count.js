// run(args) gets the checked arguments; its result is a string or {content, success, error, visual}.
function run(args) {
    const words = args.text.split(/\s+/).filter((w) => w.length > 0).length;
    if (words === 0) {
        return { content: "текст пуст", success: false, error: "empty text" };
    }
    return { content: `Слов: ${words}`, success: true };
}
