"""Irregular verbs against hand-written tables (current RAE orthography: fui, fue, dio, vio, rio, frio and
riais, friais without an accent; dé and sé keep their diacritic accent), including verbs built on a model
by a prefix (mantener, deshacer, ...)."""

from __future__ import annotations

import pytest
from test_conjugator import check_against_table

TABLES = {
    "ser": """
        P soy eres es somos sois son
        R fui fuiste fue fuimos fuisteis fueron
        I era eras era éramos erais eran
        F seré serás será seremos seréis serán
        C sería serías sería seríamos seríais serían
        S sea seas sea seamos seáis sean""",
    "ir": """
        P voy vas va vamos vais van
        R fui fuiste fue fuimos fuisteis fueron
        I iba ibas iba íbamos ibais iban
        F iré irás irá iremos iréis irán
        C iría irías iría iríamos iríais irían
        S vaya vayas vaya vayamos vayáis vayan""",
    "estar": """
        P estoy estás está estamos estáis están
        R estuve estuviste estuvo estuvimos estuvisteis estuvieron
        I estaba estabas estaba estábamos estabais estaban
        F estaré estarás estará estaremos estaréis estarán
        C estaría estarías estaría estaríamos estaríais estarían
        S esté estés esté estemos estéis estén""",
    "haber": """
        P he has ha hemos habéis han
        R hube hubiste hubo hubimos hubisteis hubieron
        I había habías había habíamos habíais habían
        F habré habrás habrá habremos habréis habrán
        C habría habrías habría habríamos habríais habrían
        S haya hayas haya hayamos hayáis hayan""",
    "dar": """
        P doy das da damos dais dan
        R di diste dio dimos disteis dieron
        I daba dabas daba dábamos dabais daban
        F daré darás dará daremos daréis darán
        C daría darías daría daríamos daríais darían
        S dé des dé demos deis den""",
    "ver": """
        P veo ves ve vemos veis ven
        R vi viste vio vimos visteis vieron
        I veía veías veía veíamos veíais veían
        F veré verás verá veremos veréis verán
        C vería verías vería veríamos veríais verían
        S vea veas vea veamos veáis vean""",
    "saber": """
        P sé sabes sabe sabemos sabéis saben
        R supe supiste supo supimos supisteis supieron
        I sabía sabías sabía sabíamos sabíais sabían
        F sabré sabrás sabrá sabremos sabréis sabrán
        C sabría sabrías sabría sabríamos sabríais sabrían
        S sepa sepas sepa sepamos sepáis sepan""",
    "caber": """
        P quepo cabes cabe cabemos cabéis caben
        R cupe cupiste cupo cupimos cupisteis cupieron
        I cabía cabías cabía cabíamos cabíais cabían
        F cabré cabrás cabrá cabremos cabréis cabrán
        C cabría cabrías cabría cabríamos cabríais cabrían
        S quepa quepas quepa quepamos quepáis quepan""",
    "tener": """
        P tengo tienes tiene tenemos tenéis tienen
        R tuve tuviste tuvo tuvimos tuvisteis tuvieron
        I tenía tenías tenía teníamos teníais tenían
        F tendré tendrás tendrá tendremos tendréis tendrán
        C tendría tendrías tendría tendríamos tendríais tendrían
        S tenga tengas tenga tengamos tengáis tengan""",
    "mantener": """
        P mantengo mantienes mantiene mantenemos mantenéis mantienen
        R mantuve mantuviste mantuvo mantuvimos mantuvisteis mantuvieron
        I mantenía mantenías mantenía manteníamos manteníais mantenían
        F mantendré mantendrás mantendrá mantendremos mantendréis mantendrán
        C mantendría mantendrías mantendría mantendríamos mantendríais mantendrían
        S mantenga mantengas mantenga mantengamos mantengáis mantengan""",
    "venir": """
        P vengo vienes viene venimos venís vienen
        R vine viniste vino vinimos vinisteis vinieron
        I venía venías venía veníamos veníais venían
        F vendré vendrás vendrá vendremos vendréis vendrán
        C vendría vendrías vendría vendríamos vendríais vendrían
        S venga vengas venga vengamos vengáis vengan""",
    "prevenir": """
        P prevengo previenes previene prevenimos prevenís previenen
        R previne previniste previno previnimos previnisteis previnieron
        I prevenía prevenías prevenía preveníamos preveníais prevenían
        F prevendré prevendrás prevendrá prevendremos prevendréis prevendrán
        C prevendría prevendrías prevendría prevendríamos prevendríais prevendrían
        S prevenga prevengas prevenga prevengamos prevengáis prevengan""",
    "poner": """
        P pongo pones pone ponemos ponéis ponen
        R puse pusiste puso pusimos pusisteis pusieron
        I ponía ponías ponía poníamos poníais ponían
        F pondré pondrás pondrá pondremos pondréis pondrán
        C pondría pondrías pondría pondríamos pondríais pondrían
        S ponga pongas ponga pongamos pongáis pongan""",
    "suponer": """
        P supongo supones supone suponemos suponéis suponen
        R supuse supusiste supuso supusimos supusisteis supusieron
        I suponía suponías suponía suponíamos suponíais suponían
        F supondré supondrás supondrá supondremos supondréis supondrán
        C supondría supondrías supondría supondríamos supondríais supondrían
        S suponga supongas suponga supongamos supongáis supongan""",
    "hacer": """
        P hago haces hace hacemos hacéis hacen
        R hice hiciste hizo hicimos hicisteis hicieron
        I hacía hacías hacía hacíamos hacíais hacían
        F haré harás hará haremos haréis harán
        C haría harías haría haríamos haríais harían
        S haga hagas haga hagamos hagáis hagan""",
    "deshacer": """
        P deshago deshaces deshace deshacemos deshacéis deshacen
        R deshice deshiciste deshizo deshicimos deshicisteis deshicieron
        I deshacía deshacías deshacía deshacíamos deshacíais deshacían
        F desharé desharás deshará desharemos desharéis desharán
        C desharía desharías desharía desharíamos desharíais desharían
        S deshaga deshagas deshaga deshagamos deshagáis deshagan""",
    # re- + h: the stressed i of hice/hizo is in hiatus with the prefix's e and takes the accent (RAE).
    "rehacer": """
        P rehago rehaces rehace rehacemos rehacéis rehacen
        R rehíce rehiciste rehízo rehicimos rehicisteis rehicieron
        I rehacía rehacías rehacía rehacíamos rehacíais rehacían
        F reharé reharás rehará reharemos reharéis reharán
        C reharía reharías reharía reharíamos reharíais reharían
        S rehaga rehagas rehaga rehagamos rehagáis rehagan""",
    "decir": """
        P digo dices dice decimos decís dicen
        R dije dijiste dijo dijimos dijisteis dijeron
        I decía decías decía decíamos decíais decían
        F diré dirás dirá diremos diréis dirán
        C diría dirías diría diríamos diríais dirían
        S diga digas diga digamos digáis digan""",
    "poder": """
        P puedo puedes puede podemos podéis pueden
        R pude pudiste pudo pudimos pudisteis pudieron
        I podía podías podía podíamos podíais podían
        F podré podrás podrá podremos podréis podrán
        C podría podrías podría podríamos podríais podrían
        S pueda puedas pueda podamos podáis puedan""",
    "querer": """
        P quiero quieres quiere queremos queréis quieren
        R quise quisiste quiso quisimos quisisteis quisieron
        I quería querías quería queríamos queríais querían
        F querré querrás querrá querremos querréis querrán
        C querría querrías querría querríamos querríais querrían
        S quiera quieras quiera queramos queráis quieran""",
    "salir": """
        P salgo sales sale salimos salís salen
        R salí saliste salió salimos salisteis salieron
        I salía salías salía salíamos salíais salían
        F saldré saldrás saldrá saldremos saldréis saldrán
        C saldría saldrías saldría saldríamos saldríais saldrían
        S salga salgas salga salgamos salgáis salgan""",
    "equivaler": """
        P equivalgo equivales equivale equivalemos equivaléis equivalen
        R equivalí equivaliste equivalió equivalimos equivalisteis equivalieron
        I equivalía equivalías equivalía equivalíamos equivalíais equivalían
        F equivaldré equivaldrás equivaldrá equivaldremos equivaldréis equivaldrán
        C equivaldría equivaldrías equivaldría equivaldríamos equivaldríais equivaldrían
        S equivalga equivalgas equivalga equivalgamos equivalgáis equivalgan""",
    "traer": """
        P traigo traes trae traemos traéis traen
        R traje trajiste trajo trajimos trajisteis trajeron
        I traía traías traía traíamos traíais traían
        F traeré traerás traerá traeremos traeréis traerán
        C traería traerías traería traeríamos traeríais traerían
        S traiga traigas traiga traigamos traigáis traigan""",
    "caer": """
        P caigo caes cae caemos caéis caen
        R caí caíste cayó caímos caísteis cayeron
        I caía caías caía caíamos caíais caían
        F caeré caerás caerá caeremos caeréis caerán
        C caería caerías caería caeríamos caeríais caerían
        S caiga caigas caiga caigamos caigáis caigan""",
    "oír": """
        P oigo oyes oye oímos oís oyen
        R oí oíste oyó oímos oísteis oyeron
        I oía oías oía oíamos oíais oían
        F oiré oirás oirá oiremos oiréis oirán
        C oiría oirías oiría oiríamos oiríais oirían
        S oiga oigas oiga oigamos oigáis oigan""",
    "andar": """
        P ando andas anda andamos andáis andan
        R anduve anduviste anduvo anduvimos anduvisteis anduvieron
        I andaba andabas andaba andábamos andabais andaban
        F andaré andarás andará andaremos andaréis andarán
        C andaría andarías andaría andaríamos andaríais andarían
        S ande andes ande andemos andéis anden""",
    "oler": """
        P huelo hueles huele olemos oléis huelen
        R olí oliste olió olimos olisteis olieron
        I olía olías olía olíamos olíais olían
        F oleré olerás olerá oleremos oleréis olerán
        C olería olerías olería oleríamos oleríais olerían
        S huela huelas huela olamos oláis huelan""",
    "reír": """
        P río ríes ríe reímos reís ríen
        R reí reíste rio reímos reísteis rieron
        I reía reías reía reíamos reíais reían
        F reiré reirás reirá reiremos reiréis reirán
        C reiría reirías reiría reiríamos reiríais reirían
        S ría rías ría riamos riais rían""",
    "sonreír": """
        P sonrío sonríes sonríe sonreímos sonreís sonríen
        R sonreí sonreíste sonrió sonreímos sonreísteis sonrieron
        I sonreía sonreías sonreía sonreíamos sonreíais sonreían
        F sonreiré sonreirás sonreirá sonreiremos sonreiréis sonreirán
        C sonreiría sonreirías sonreiría sonreiríamos sonreiríais sonreirían
        S sonría sonrías sonría sonriamos sonriáis sonrían""",
    "freír": """
        P frío fríes fríe freímos freís fríen
        R freí freíste frio freímos freísteis frieron
        I freía freías freía freíamos freíais freían
        F freiré freirás freirá freiremos freiréis freirán
        C freiría freirías freiría freiríamos freiríais freirían
        S fría frías fría friamos friais frían""",
}


@pytest.mark.lab00
@pytest.mark.parametrize("infinitive", sorted(TABLES))
def test_irregular_verbs_match_hand_written_tables(infinitive):
    check_against_table(infinitive, TABLES[infinitive])


def test_prefix_hiatus_accent_only_where_the_i_or_u_is_stressed():
    from minitrain.data.orthography import add_prefix

    assert add_prefix("re", "hice") == "rehíce" and add_prefix("re", "hizo") == "rehízo"
    assert add_prefix("re", "hicimos") == "rehicimos"  # stress on -ci-
    assert add_prefix("des", "hice") == "deshice"  # a consonant before the h: no hiatus
    assert add_prefix("re", "huelo") == "rehuelo"  # hue is a diphthong
    assert add_prefix("re", "hago") == "rehago"
