"""``python -m memself``: the same CLI as the ``memself`` console script."""

from memself.cli import main

if __name__ == "__main__":
    main()
