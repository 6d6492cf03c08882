"""Print how many body lines of churn.py's on_main_greenlet_gone coverage recorded, as 'K/N lines'."""
import ast
import json
import sys


def main(source, report):
    tree = ast.parse(open(source).read())
    fn = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "on_main_greenlet_gone")
    body = {stmt.lineno for n in fn.body for stmt in ast.walk(n) if isinstance(stmt, ast.stmt)}
    data = json.load(open(report))
    files = [v for k, v in data["files"].items() if k.endswith("churn.py")]
    executed = set(files[0]["executed_lines"]) if files else set()
    print(f"{len(body & executed)}/{len(body)}_lines")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
