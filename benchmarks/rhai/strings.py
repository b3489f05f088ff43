def main():
    words = ["цена", "товар", "склад", "price", "order", "слово"]
    text = ""
    for i in range(100_000):
        text += words[i % 6]
        text += " "
    counts = {}
    for word in text.split(" "):
        if word != "":
            counts[word] = counts.get(word, 0) + 1
    print(len(counts))


main()
