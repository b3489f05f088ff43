// Keeps a note in the user's state (docs/scripts.md 8.8); its YAML makes every call wait for a person's approval.
function run(args) {
  const count = state_push("user", "notes", args.text);
  return `Заметка сохранена (всего заметок: ${count}).`;
}
