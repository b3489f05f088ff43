def main():
    report = {"body": ""}
    parts = ["", ""]
    log = ""

    def note():
        nonlocal log
        log += "entry; "

    tail = ""
    for i in range(50_000):
        report["body"] += "line, "
        parts[1] += "cell, "
        note()
        tail += "item, "
    print(len(report["body"]) + len(parts[1]) + len(log) + len(tail))


main()
