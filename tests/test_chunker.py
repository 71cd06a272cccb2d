"""The ``code`` chunker: every line of a file in exactly one unit, a unit per definition with its name and
enclosing scope, code between definitions a unit of its own, and a file with a syntax error keeping the units
of what parses -- in each of the 19 languages (and TSX), on a small file of each."""

from __future__ import annotations

import textwrap

import pytest

from structret.registry import get_registry
from structret.testing import check_plugin

# language: (file name, source, {qualified name: kind} that must be units, a line of module-level code,
# a line to break the file with (inserted after the module-level code))
FILES = {
    "python": ("shop/cart.py", '''\
        import json
        TAX = 0.2

        class Cart:
            """A basket of items."""
            def __init__(self):
                self.items = []

            def total(self):
                return sum(i.price for i in self.items) * (1 + TAX)


        def load_cart(path):
            with open(path) as f:
                return json.load(f)
        ''', {"Cart": "class", "Cart.total": "function", "load_cart": "function"}, "TAX = 0.2", "def broken(:"),
    "java": ("src/Cart.java", '''\
        package shop;
        import java.util.List;

        public class Cart {
            private final List<Item> items;

            /** The sum of the prices. */
            public double total() {
                return items.stream().mapToDouble(Item::price).sum();
            }
        }
        ''', {"Cart": "class", "Cart.total": "method"}, "import java.util.List;", "int x = ;"),
    "go": ("cart/cart.go", '''\
        package cart

        import "fmt"

        type Cart struct {
            Items []Item
        }

        // Total sums the prices.
        func (c *Cart) Total() float64 {
            return 0
        }

        func Describe(c Cart) string {
            return fmt.Sprint(c)
        }
        ''', {"Cart": "type", "Total": "method", "Describe": "function"}, 'import "fmt"', "var x = = 1"),
    "javascript": ("src/cart.js", '''\
        const TAX = 0.2;

        class Cart {
          constructor() { this.items = []; }

          total() {
            return this.items.reduce((s, i) => s + i.price, 0);
          }
        }

        function loadCart(text) {
          return JSON.parse(text);
        }

        const describe = (cart) => `${cart.items.length} items`;
        ''', {"Cart": "class", "Cart.total": "method", "loadCart": "function", "describe": "function"},
        "const TAX = 0.2;", "let x = = 1;"),
    "typescript": ("src/cart.ts", '''\
        import { Item } from "./item";

        export interface Priced {
          price: number;
        }

        export class Cart {
          private items: Item[] = [];

          total(): number {
            return this.items.reduce((s, i) => s + i.price, 0);
          }
        }

        export function loadCart(text: string): Cart {
          return JSON.parse(text) as Cart;
        }
        ''', {"Priced": "interface", "Cart": "class", "Cart.total": "method", "loadCart": "function"},
        'import { Item } from "./item";', "let x: = ;"),
    "tsx": ("src/Cart.tsx", '''\
        import React from "react";

        export class CartView extends React.Component {
          render() {
            return <div>{this.props.items.length}</div>;
          }
        }

        export function CartBadge(props: { n: number }) {
          return <span>{props.n}</span>;
        }
        ''', {"CartView": "class", "CartView.render": "method", "CartBadge": "function"},
        'import React from "react";', "let x: = ;"),
    "ruby": ("lib/cart.rb", '''\
        require "json"

        module Shop
          class Cart
            def initialize
              @items = []
            end

            def total
              @items.sum(&:price)
            end
          end
        end

        def load_cart(path)
          JSON.parse(File.read(path))
        end
        ''', {"Shop": "module", "Shop.Cart": "class", "Shop.Cart.total": "method", "load_cart": "method"},
        'require "json"', "def ("),
    "php": ("src/Cart.php", '''\
        <?php
        namespace Shop;

        class Cart {
            private array $items = [];

            public function total(): float {
                return array_sum(array_map(fn($i) => $i->price, $this->items));
            }
        }

        function load_cart(string $path): Cart {
            return unserialize(file_get_contents($path));
        }
        ''', {"Cart": "class", "Cart.total": "method", "load_cart": "function"}, "namespace Shop;",
        "function ( {"),
    "rust": ("src/cart.rs", '''\
        use std::collections::HashMap;

        /// A basket of items.
        pub struct Cart {
            items: Vec<Item>,
        }

        impl Cart {
            pub fn total(&self) -> f64 {
                self.items.iter().map(|i| i.price).sum()
            }
        }

        pub fn load_cart(text: &str) -> HashMap<String, f64> {
            HashMap::new()
        }
        ''', {"Cart": "impl", "Cart.total": "function", "load_cart": "function"},
        "use std::collections::HashMap;", "fn ( {"),
    "c": ("src/cart.c", '''\
        #include <stdio.h>
        #define TAX 0.2

        struct cart {
            double *prices;
            int n;
        };

        double cart_total(const struct cart *c) {
            double sum = 0;
            for (int i = 0; i < c->n; i++) sum += c->prices[i];
            return sum * (1 + TAX);
        }
        ''', {"cart": "struct", "cart_total": "function"}, "#include <stdio.h>", "int x = ;"),
    "cpp": ("src/cart.cpp", '''\
        #include <vector>

        namespace shop {

        class Cart {
         public:
          double total() const {
            double sum = 0;
            for (double p : prices_) sum += p;
            return sum;
          }
         private:
          std::vector<double> prices_;
        };

        double tax(double amount) { return amount * 0.2; }

        }  // namespace shop
        ''', {"shop": "namespace", "shop.Cart": "class", "shop.Cart.total": "function", "shop.tax": "function"},
        "#include <vector>", "int x = ;"),
    "csharp": ("src/Cart.cs", '''\
        using System.Linq;

        namespace Shop
        {
            public class Cart
            {
                private readonly List<Item> items = new();

                public double Total()
                {
                    return items.Sum(i => i.Price);
                }
            }
        }
        ''', {"Shop": "namespace", "Shop.Cart": "class", "Shop.Cart.Total": "method"}, "using System.Linq;",
        "int x = ;"),
    "kotlin": ("src/Cart.kt", '''\
        package shop

        import kotlin.math.round

        class Cart(private val items: List<Item>) {
            fun total(): Double = items.sumOf { it.price }
        }

        fun loadCart(text: String): Cart = Cart(emptyList())
        ''', {"Cart": "class", "Cart.total": "function", "loadCart": "function"}, "import kotlin.math.round",
        "val x = = 1"),
    "scala": ("src/Cart.scala", '''\
        package shop

        import scala.math.round

        class Cart(items: List[Item]) {
          def total: Double = items.map(_.price).sum
        }

        object Cart {
          def empty: Cart = new Cart(Nil)
        }
        ''', {"Cart": "class", "Cart.total": "function", "Cart.empty": "function"}, "import scala.math.round",
        "def ( {"),
    "swift": ("Sources/Cart.swift", '''\
        import Foundation

        struct Cart {
            var items: [Item] = []

            func total() -> Double {
                return items.reduce(0) { $0 + $1.price }
            }
        }

        func loadCart(_ data: Data) -> Cart {
            return Cart()
        }
        ''', {"Cart": "class", "Cart.total": "function", "loadCart": "function"}, "import Foundation",
        "func ( {"),
    "elixir": ("lib/cart.ex", '''\
        defmodule Shop.Cart do
          @moduledoc "A basket of items."
          defstruct items: []

          def total(%__MODULE__{items: items}) do
            Enum.sum(Enum.map(items, & &1.price))
          end

          defp tax(amount), do: amount * 0.2
        end
        ''', {"Shop.Cart": "module", "Shop.Cart.total": "function", "Shop.Cart.tax": "function"},
        '@moduledoc "A basket of items."', "def ( do"),
    "haskell": ("src/Cart.hs", '''\
        module Cart where

        import Data.List (foldl')

        data Cart = Cart { items :: [Double] }

        total :: Cart -> Double
        total cart = foldl' (+) 0 (items cart)

        class Priced a where
          price :: a -> Double
        ''', {"Cart": "type", "total": "function", "Priced": "class"}, "import Data.List (foldl')",
        "x = = ="),
    "lua": ("lua/cart.lua", '''\
        local M = {}
        local TAX = 0.2

        function M.total(cart)
          local sum = 0
          for _, item in ipairs(cart.items) do sum = sum + item.price end
          return sum * (1 + TAX)
        end

        local function describe(cart)
          return #cart.items .. " items"
        end

        return M
        ''', {"M.total": "function", "describe": "function"}, "local TAX = 0.2", "function ( end"),
    "zig": ("src/cart.zig", '''\
        const std = @import("std");

        pub const Cart = struct {
            items: []const f64,

            pub fn total(self: Cart) f64 {
                var sum: f64 = 0;
                for (self.items) |p| sum += p;
                return sum;
            }
        };

        pub fn tax(amount: f64) f64 {
            return amount * 0.2;
        }
        ''', {"Cart": "struct", "Cart.total": "function", "tax": "function"}, 'const std = @import("std");',
        "const x = = 1;"),
    "bash": ("lib/cart.bash", '''\
        #!/usr/bin/env bash
        set -euo pipefail
        TAX=0.2

        cart_total() {
          local sum=0
          for p in "$@"; do sum=$((sum + p)); done
          echo "$sum"
        }

        function cart_describe {
          echo "$# items"
        }
        ''', {"cart_total": "function", "cart_describe": "function"}, "set -euo pipefail", "if then fi ((("),
}


@pytest.fixture(scope="module")
def chunker():
    return get_registry().create("chunker", "syntax")


def _check_tiling(units, text):
    """Every line that is not blank in exactly one unit, in order; each unit's text its lines, none blank at
    either end."""
    lines = text.splitlines()
    assert units, "no units"
    covered = [0] * len(lines)
    for before, after in zip(units, units[1:]):
        assert after.start > before.end, (before, after)
    for unit in units:
        assert unit.text.splitlines() == lines[unit.start - 1:unit.end]
        assert lines[unit.start - 1].strip() and lines[unit.end - 1].strip(), unit
        for n in range(unit.start - 1, unit.end):
            covered[n] += 1
    assert all(c == 1 for c, line in zip(covered, lines) if line.strip()), [
        (n + 1, line) for n, (c, line) in enumerate(zip(covered, lines)) if line.strip() and c != 1]


@pytest.mark.parametrize("language", sorted(FILES))
def test_every_language_is_cut_into_definitions_and_the_code_between_them(chunker, language):
    path, source, wanted, module_line, _ = FILES[language]
    text = textwrap.dedent(source)
    assert chunker.language(path, text[:4096].encode()) == language
    units = chunker.chunk(text, path)
    _check_tiling(units, text)
    found = {(u.qualified, u.kind.split("-")[0]) for u in units}
    for name, kind in wanted.items():
        assert (name, kind) in found, (name, kind, sorted(found))
    holding = [u for u in units if module_line in u.text]  # module-level code: a unit, not a function's
    assert len(holding) == 1 and holding[0].kind not in ("function", "method"), (module_line, holding)
    assert all(u.language == language for u in units)


@pytest.mark.parametrize("language", sorted(FILES))
def test_a_syntax_error_keeps_the_units_of_what_parses(chunker, language):
    path, source, wanted, module_line, broken = FILES[language]
    text = textwrap.dedent(source)
    lines = text.splitlines(keepends=True)
    at = next(n for n, line in enumerate(lines) if module_line in line) + 1
    text = "".join(lines[:at] + [broken + "\n"] + lines[at:])
    units = chunker.chunk(text, path)
    _check_tiling(units, text)
    found = {u.qualified.rsplit(".", 1)[-1] for u in units}
    kept = [name for name in wanted if name.rsplit(".", 1)[-1] in found]
    assert len(kept) >= len(wanted) - 1, (wanted, found)  # an error may swallow the definition right after it
    assert any(broken in u.text for u in units)  # the broken line is in a unit too


def test_a_long_definition_is_split_at_the_cap_and_keeps_its_name():
    chunker = get_registry().create("chunker", "syntax", max_chars=200)
    body = "".join(f"    total = total + item_{n}.price\n" for n in range(30))
    text = f"def long_sum(items):\n    total = 0\n{body}    return total\n"
    units = chunker.chunk(text, "a.py")
    _check_tiling(units, text)
    assert len(units) > 3 and all(len(u.text) <= 200 for u in units)
    assert [u.kind for u in units] == ["function"] + ["function-part"] * (len(units) - 1)
    assert {u.name for u in units} == {"long_sum"}


def test_a_small_class_is_one_unit_unless_methods_stand_alone():
    text = "class A:\n    x = 1\n\n    def f(self):\n        return 1\n"
    alone = get_registry().create("chunker", "syntax").chunk(text, "a.py")
    together = get_registry().create("chunker", "syntax", methods_alone=False).chunk(text, "a.py")
    assert [(u.kind, u.qualified) for u in alone] == [("class", "A"), ("function", "A.f")]
    assert [(u.kind, u.qualified) for u in together] == [("class", "A")]


def test_text_files_are_cut_at_headings_and_paragraphs():
    chunker = get_registry().create("chunker", "syntax", max_chars=120)
    text = "# Install\n\nRun pip install.\n\n## Use\n\n" + "A paragraph of words. " * 8 + "\n\nAnother one.\n"
    assert chunker.language("README.md") == "text" and chunker.language("Dockerfile") == "text"
    units = chunker.chunk(text, "README.md")
    _check_tiling(units, text)
    assert [u.name for u in units if u.kind == "section"] == ["Install", "Use"]


def test_files_it_does_not_read_and_scripts_it_does():
    chunker = get_registry().create("chunker", "syntax")
    assert chunker.language("logo.png") is None and chunker.language("archive.tar.gz") is None
    assert chunker.language("bin/run", b"#!/usr/bin/env bash\necho hi\n") == "bash"
    assert chunker.language("include/fmt.h", b"namespace fmt { template <typename T> }") == "cpp"
    assert chunker.language("lib/curl.h", b"struct Curl_easy; int curl_init(void);") == "c"


def test_deep_nesting_is_cut_not_crashed_on():
    chunker = get_registry().create("chunker", "syntax")
    text = "x = " + "[" * 3000 + "]" * 3000 + "\n\ndef after():\n    return 1\n"
    units = chunker.chunk(text, "deep.py")
    _check_tiling(units, text)
    assert any(u.name == "after" for u in units)


def test_the_chunker_meets_its_contract():
    check_plugin("chunker", "syntax")
