"""`rapid-mlx` console script and `python -m rapid_mlx`: exec the native CLI with the same args."""
import sys

from rapid_mlx import exec_binary


def main():
    exec_binary(sys.argv[1:])


if __name__ == "__main__":
    main()
