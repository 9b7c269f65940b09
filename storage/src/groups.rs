//! Series sorted into named groups by selectors (a tenant's usage groups): a series is in
//! every group whose selector selects its labels, and in [`OTHER`] when in none. Ingest
//! counts what it receives this way and the usage endpoint what is stored, so both must
//! sort a series alike.

use crate::model::Labels;
use crate::selector::Selector;

/// The group of a series no selector selects.
pub const OTHER: &str = "other";

/// The most selectors a membership tells apart: one bit each.
pub const MAX_SELECTORS: usize = u64::BITS as usize;

/// Which selectors of an ordered list select one series: a bit per selector, so it is
/// computed once per series and copied freely.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Membership(u64);

impl Membership {
    /// The selectors of `selectors` (the first [`MAX_SELECTORS`]) that select `labels`.
    pub fn of<'s>(selectors: impl IntoIterator<Item = &'s Selector>, labels: &Labels) -> Membership {
        let mut bits = 0;
        for (i, selector) in selectors.into_iter().take(MAX_SELECTORS).enumerate() {
            if selector.selects(|name| labels.get(name).map(String::as_str)) {
                bits |= 1 << i;
            }
        }
        Membership(bits)
    }

    /// The positions of the selecting selectors, in order; none means [`OTHER`].
    pub fn groups(self) -> impl Iterator<Item = usize> {
        (0..MAX_SELECTORS).filter(move |i| self.0 & (1 << i) != 0)
    }

    /// The names the series counts under: `name` of each selecting selector's position,
    /// or [`OTHER`] alone.
    pub fn names<'n>(self, name: impl Fn(usize) -> &'n str + 'n) -> impl Iterator<Item = &'n str> + 'n {
        let other = (self.0 == 0).then_some(OTHER);
        self.groups().map(name).chain(other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selector::parse_selector;

    #[test]
    fn a_series_is_in_every_selecting_group_or_in_other_alone() {
        let selectors: Vec<Selector> = ["{service.name=~\"checkout.*\"}", "{region=\"eu\"}", "{}"]
            .iter()
            .map(|s| parse_selector(s).unwrap())
            .collect();
        let names = ["checkout", "eu", "all"];
        let labels = |pairs: &[(&str, &str)]| -> Labels {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let eu_checkout = Membership::of(
            &selectors,
            &labels(&[("service.name", "checkout-api"), ("region", "eu")]),
        );
        assert_eq!(eu_checkout.groups().collect::<Vec<_>>(), [0, 1, 2]);
        let us_cart = Membership::of(
            &selectors[..2],
            &labels(&[("service.name", "cart"), ("region", "us")]),
        );
        assert_eq!(us_cart.names(|i| names[i]).collect::<Vec<_>>(), [OTHER]);
        let us_checkout = Membership::of(&selectors[..2], &labels(&[("service.name", "checkout")]));
        assert_eq!(us_checkout.names(|i| names[i]).collect::<Vec<_>>(), ["checkout"]);
    }
}
