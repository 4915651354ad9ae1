from matplotlib.colors import to_rgb

from plstitch_eval.analysis.style import ERROR_STRIP, OKABE_ITO, WRONG, class_colors


def test_class_colors_are_okabe_ito_then_distinct():
    colors = class_colors(48)  # Breakfast has 48 classes
    assert colors[:7] == [to_rgb(c) for c in OKABE_ITO[:7]]
    assert len(set(colors[:20])) == 20
    assert to_rgb(ERROR_STRIP) not in colors[:20]  # error markers never look like a class
    assert to_rgb(WRONG) in colors  # vermillion is a class colour, so ribbons mark errors in black instead
