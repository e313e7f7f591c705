"""Print a per-column summary of a CSV file (standard library only)."""

import csv
import sys


def infer(values):
    numbers = []
    for value in values:
        try:
            numbers.append(float(value))
        except ValueError:
            return "text", None
    return "number", numbers


def main(path):
    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    if not rows:
        print("empty file")
        return
    header, body = rows[0], rows[1:]
    print(f"rows: {len(body)}")
    for index, name in enumerate(header):
        column = [row[index] for row in body if index < len(row)]
        present = [value for value in column if value.strip()]
        kind, numbers = infer(present)
        line = f"{name}: {kind}, {len(body) - len(present)} missing"
        if numbers:
            line += f", min {min(numbers)}, max {max(numbers)}"
        print(line)


if __name__ == "__main__":
    main(sys.argv[1])
