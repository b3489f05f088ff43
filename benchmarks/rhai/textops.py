def main():
    names = ["  alpha ", " beta", "gamma  ", " delta ", "epsilon", " zeta "]
    report = ""
    tally = {}
    for i in range(40_000):
        name = names[i % 6]
        name = name.strip()
        key = name[0:3].upper()
        if "a" in name:
            tally[key] = tally.get(key, 0) + len(name)
        report += f"{key}:{name.find('l')};"
    print(len(report) + len(tally))
main()
